"""What each AWS kind calls with a run's rendered input, and what the service's answer means. Pure: the call is
made by tickwork.targets.aws.target.

- Lambda `Invoke`: `Event` is accepted (202) or not; `RequestResponse` runs the function, whose FunctionError is a
  failed attempt (retried, as an HTTP 5xx), its payload kept as a body is (bounded, secrets redacted); the run's
  ids go in the ClientContext, which Lambda gives a synchronous invocation only.
- SQS `SendMessage`: the run's ids as message attributes; a FIFO queue's MessageDeduplicationId is the run's key
  (tickwork.targets.aws.rendering.run_key), the same on every attempt, so SQS drops a retry of a send whose
  answer was lost (within its 5-minute window), never a replay.
- SNS `Publish`: the run's ids as message attributes.
- EventBridge `PutEvents`: one entry, the input as its detail (a JSON object), its time the scheduled one; a
  failed entry (FailedEntryCount) is a failed attempt, classified by its error code.
- Step Functions `StartExecution`: named by the run's key, so `ExecutionAlreadyExists` for that name means a
  previous attempt started it (a success). Standard workflows only: an Express workflow does not dedupe names.
"""
from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any, Callable

from tickwork.http.delivery import MAX_STORED_BODY_BYTES, stored_body
from tickwork.models import StartedExecution
from tickwork.outcome import Failure, FailureKind
from tickwork.targets.aws import failures
from tickwork.targets.aws.rendering import run_key
from tickwork.targetspec.aws import AwsTargetSpec, InvocationType
from tickwork.timeutil import rfc3339
from tickwork.vocab import TargetKind

_DOMAINS = {"aws-cn": "amazonaws.com.cn"}  # an SQS queue's URL, by partition; amazonaws.com otherwise
_EVENT_TIME_BYTES = 14  # how EventBridge counts an entry's Time


@dataclass(frozen=True)
class Answer:
    status_code: int | None
    body: str | None
    failure: Failure | None = None


@dataclass(frozen=True)
class ServiceCall:
    service: str  # boto3's name of the service
    action: str  # IAM's name of the call, as a refusal names it
    operation: str  # the client's method
    params: dict[str, Any]
    size: int  # what the service counts against its limit, in bytes
    counted: str  # what that is
    read: Callable[[dict[str, Any]], Answer]
    already: frozenset[str] = field(default_factory=frozenset)  # error codes that mean an earlier attempt did it


def build(spec: AwsTargetSpec, text: str, run: StartedExecution) -> ServiceCall | Failure:
    """The call `spec` makes at this attempt with `text`, its rendered input; a Failure (refused) for an input the
    service cannot take."""
    return _BUILDERS[spec.kind](spec, text, run)


def run_attributes(run: StartedExecution) -> dict[str, dict[str, str]]:
    """The run's ids as SQS and SNS message attributes, named as an HTTP run's headers."""
    return {"Tickwork-Run-Id": {"DataType": "String", "StringValue": run.id},
            "Tickwork-Job-Id": {"DataType": "String", "StringValue": run.job_id},
            "Tickwork-Attempt": {"DataType": "Number", "StringValue": str(run.attempt)},
            "Tickwork-Scheduled-For": {"DataType": "String", "StringValue": rfc3339(run.scheduled_for) or ""}}


def queue_url(spec: AwsTargetSpec) -> str:
    """The queue's URL, from its ARN: no sqs:GetQueueUrl, so the role needs sqs:SendMessage alone."""
    domain = _DOMAINS.get(spec.partition, "amazonaws.com")
    return f"https://sqs.{spec.region}.{domain}/{spec.account}/{spec.resource}"


def _sqs(spec: AwsTargetSpec, text: str, run: StartedExecution) -> ServiceCall:
    attributes = run_attributes(run)
    params: dict[str, Any] = {"QueueUrl": queue_url(spec), "MessageBody": text, "MessageAttributes": attributes}
    if spec.fifo:
        params["MessageDeduplicationId"] = run_key(run)
    if spec.sqs_parameters.message_group_id is not None:
        params["MessageGroupId"] = spec.sqs_parameters.message_group_id
    return ServiceCall("sqs", "sqs:SendMessage", "send_message", params, _bytes(text) + _attribute_bytes(attributes),
                       "message (body and attributes)", _ids("MessageId", "SequenceNumber"))


def _sns(spec: AwsTargetSpec, text: str, run: StartedExecution) -> ServiceCall:
    attributes = run_attributes(run)
    params = {"TopicArn": spec.arn, "Message": text, "MessageAttributes": attributes}
    return ServiceCall("sns", "sns:Publish", "publish", params, _bytes(text) + _attribute_bytes(attributes),
                       "message (body and attributes)", _ids("MessageId", "SequenceNumber"))


def _eventbridge(spec: AwsTargetSpec, text: str, run: StartedExecution) -> ServiceCall | Failure:
    try:
        detail = json.loads(text)
    except ValueError:
        detail = None
    if not isinstance(detail, dict):
        return Failure(FailureKind.REFUSED, "refused: the input must be a JSON object (the event's detail)")
    parameters = spec.eventbridge_parameters
    assert parameters is not None, "an event bus's spec has them (AwsTargetSpec.from_dict)"
    entry = {"EventBusName": spec.arn, "Source": parameters.source, "DetailType": parameters.detail_type,
             "Detail": text, "Time": run.scheduled_for}
    size = _bytes(parameters.source) + _bytes(parameters.detail_type) + _bytes(text) + _EVENT_TIME_BYTES
    action = "events:PutEvents"

    def read(answer: dict[str, Any]) -> Answer:
        entries = answer.get("Entries") or [{}]
        if answer.get("FailedEntryCount"):
            code = str(entries[0].get("ErrorCode") or "FailedEntry")
            return Answer(_status(answer), None, failures.of_code(code, action, spec.role_arn))
        return Answer(_status(answer), json.dumps({"EventId": entries[0].get("EventId")}))

    return ServiceCall("events", action, "put_events", {"Entries": [entry]}, size, "entry", read)


def _step_functions(spec: AwsTargetSpec, text: str, run: StartedExecution) -> ServiceCall:
    params = {"stateMachineArn": spec.arn, "name": run_key(run), "input": text}
    return ServiceCall("stepfunctions", "states:StartExecution", "start_execution", params, _bytes(text), "input",
                       _ids("executionArn"), already=frozenset({"ExecutionAlreadyExists"}))


def _lambda(spec: AwsTargetSpec, text: str, run: StartedExecution) -> ServiceCall:
    invocation = spec.lambda_parameters.invocation_type
    params: dict[str, Any] = {"FunctionName": spec.arn, "InvocationType": invocation.value, "Payload": text.encode()}
    if invocation is InvocationType.REQUEST_RESPONSE:
        ids = {name: value["StringValue"] for name, value in run_attributes(run).items()}
        params["ClientContext"] = base64.b64encode(json.dumps({"custom": ids}).encode()).decode()
    return ServiceCall("lambda", "lambda:InvokeFunction", "invoke", params, _bytes(text), "payload", _lambda_answer)


def _lambda_answer(answer: dict[str, Any]) -> Answer:
    stream = answer.get("Payload")
    payload = stream.read() if stream is not None else b""
    kept = payload[:MAX_STORED_BODY_BYTES]
    body = stored_body(kept, len(kept) == len(payload)) if payload else None
    status = answer.get("StatusCode")
    error = answer.get("FunctionError")
    if error:
        return Answer(status, body, Failure(FailureKind.TRANSIENT_STATUS, f"function error ({error})"))
    return Answer(status, body)


def _ids(*names: str) -> Callable[[dict[str, Any]], Answer]:
    """An answer kept as the ids it gives (a message's, an execution's), as JSON."""
    def read(answer: dict[str, Any]) -> Answer:
        return Answer(_status(answer), json.dumps({name: answer[name] for name in names if name in answer}))
    return read


def _status(answer: dict[str, Any]) -> int | None:
    status = answer.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return status if isinstance(status, int) else None


def _attribute_bytes(attributes: dict[str, dict[str, str]]) -> int:
    """How SQS and SNS count message attributes: each name, data type and value."""
    return sum(_bytes(name) + _bytes(value["DataType"]) + _bytes(value["StringValue"])
               for name, value in attributes.items())


def _bytes(text: str) -> int:
    return len(text.encode())


_BUILDERS: dict[TargetKind, Callable[[AwsTargetSpec, str, StartedExecution], ServiceCall | Failure]] = {
    TargetKind.AWS_LAMBDA: _lambda, TargetKind.AWS_SQS: _sqs, TargetKind.AWS_SNS: _sns,
    TargetKind.AWS_EVENTBRIDGE: _eventbridge, TargetKind.AWS_STEP_FUNCTIONS: _step_functions,
}
