"""What an AWS service's answer or error means (tickwork.targets.aws.failures, services): pure."""
from __future__ import annotations

import base64
import io
import json
from datetime import datetime, timezone
from typing import Any

import pytest
from botocore.exceptions import ConnectTimeoutError, EndpointConnectionError, ParamValidationError, ReadTimeoutError

from tickwork.models import StartedExecution
from tickwork.outcome import Failure, FailureKind, Outcome
from tickwork.targets.aws import failures, services
from tickwork.targets.aws.target import AwsTarget
from tickwork.targetspec.aws import AwsTargetSpec
from tickwork.vocab import TargetKind

ROLE = "arn:aws:iam::123456789012:role/tickwork-target-x"
AT = datetime(2026, 1, 29, 9, 0, tzinfo=timezone.utc)
RUN = StartedExecution("run-1", "job-1", "tenant-1", AT, 2, {}, {})


@pytest.mark.parametrize(("code", "status", "kind"), [
    ("AccessDeniedException", 400, FailureKind.REFUSED),
    ("AuthorizationError", 403, FailureKind.REFUSED),  # SNS's
    ("SomethingNew", 403, FailureKind.REFUSED),
    ("ThrottlingException", 400, FailureKind.TRANSIENT_STATUS),
    ("TooManyRequestsException", 429, FailureKind.TRANSIENT_STATUS),
    ("ServiceUnavailable", 503, FailureKind.TRANSIENT_STATUS),
    ("503", 503, FailureKind.TRANSIENT_STATUS),
    ("ExpiredTokenException", 403, FailureKind.TRANSIENT_STATUS),  # a new session may do
    ("QueueDoesNotExist", 400, FailureKind.REJECTED_STATUS),
    ("ResourceNotFoundException", 404, FailureKind.REJECTED_STATUS),
    ("InvalidParameter", None, FailureKind.REJECTED_STATUS),
])
def test_a_service_error_is_classified_by_its_code_and_status(code: str, status: int | None,
                                                              kind: FailureKind) -> None:
    failure = failures.of_code(code, "sqs:SendMessage", ROLE, status)
    assert failure.kind is kind and code in failure.error and "sqs:SendMessage" in failure.error
    assert (ROLE in failure.error) is (kind is FailureKind.REFUSED)


@pytest.mark.parametrize(("exc", "kind"), [
    (ReadTimeoutError(endpoint_url="http://127.0.0.1:1"), FailureKind.TIMEOUT),
    (ConnectTimeoutError(endpoint_url="http://127.0.0.1:1"), FailureKind.CONNECTION),
    (EndpointConnectionError(endpoint_url="http://127.0.0.1:1"), FailureKind.CONNECTION),
    (ParamValidationError(report="Invalid length for parameter MessageBody, value: s3cr3t"), FailureKind.REFUSED),
    (OSError("reset"), FailureKind.CONNECTION),
])
def test_no_answer_is_classified_without_quoting_the_exception(exc: Exception, kind: FailureKind) -> None:
    failure = failures.of_exception(exc, "sqs:SendMessage", ROLE)
    assert failure.kind is kind and "127.0.0.1" not in failure.error and "s3cr3t" not in failure.error


def _spec(**given: Any) -> AwsTargetSpec:
    return AwsTargetSpec.from_dict({"role_arn": ROLE, **given})


def test_a_failed_eventbridge_entry_is_a_failed_attempt_by_its_code() -> None:
    spec = _spec(arn="arn:aws:events:us-east-1:123456789012:event-bus/b",
                 eventbridge_parameters={"detail_type": "tick", "source": "tickwork"})
    call = services.build(spec, "{}", RUN)
    assert not isinstance(call, Failure) and call.size == len("tickwork") + len("tick") + 2 + 14
    meta = {"ResponseMetadata": {"HTTPStatusCode": 200}}
    throttled = call.read({"FailedEntryCount": 1, "Entries": [{"ErrorCode": "ThrottlingException"}], **meta})
    malformed = call.read({"FailedEntryCount": 1, "Entries": [{"ErrorCode": "MalformedDetail"}], **meta})
    put = call.read({"FailedEntryCount": 0, "Entries": [{"EventId": "e1"}], **meta})
    assert throttled.failure and throttled.failure.kind is FailureKind.TRANSIENT_STATUS
    assert malformed.failure and malformed.failure.kind is FailureKind.REJECTED_STATUS
    assert (put.status_code, put.body, put.failure) == (200, '{"EventId": "e1"}', None)


def test_an_eventbridge_detail_must_be_a_json_object() -> None:
    spec = _spec(arn="arn:aws:events:us-east-1:123456789012:event-bus/b",
                 eventbridge_parameters={"detail_type": "tick", "source": "tickwork"})
    refused = services.build(spec, "[1]", RUN)
    assert isinstance(refused, Failure) and refused.kind is FailureKind.REFUSED


def test_a_function_error_is_a_failed_attempt_keeping_a_bounded_payload() -> None:
    spec = _spec(arn="arn:aws:lambda:us-east-1:123456789012:function:f",
                 lambda_parameters={"invocation_type": "RequestResponse"})
    call = services.build(spec, "{}", RUN)
    assert not isinstance(call, Failure)
    context = json.loads(base64.b64decode(call.params["ClientContext"]))
    assert context["custom"]["Tickwork-Run-Id"] == "run-1"
    failed = call.read({"StatusCode": 200, "FunctionError": "Unhandled", "Payload": io.BytesIO(b"x" * 10_000)})
    assert failed.failure and failed.failure.kind is FailureKind.TRANSIENT_STATUS
    assert "Unhandled" in failed.failure.error
    assert failed.status_code == 200 and failed.body == "x" * 4096
    assert call.read({"StatusCode": 200, "Payload": io.BytesIO(b'"ok"')}).body == '"ok"'


def test_sqs_and_sns_count_their_attributes_and_fifo_sends_carry_the_runs_key() -> None:
    spec = _spec(arn="arn:aws:sqs:us-east-1:123456789012:q.fifo", sqs_parameters={"message_group_id": "g"})
    call = services.build(spec, "body", RUN)
    assert not isinstance(call, Failure)
    assert call.params["QueueUrl"] == "https://sqs.us-east-1.amazonaws.com/123456789012/q.fifo"
    assert (call.params["MessageDeduplicationId"], call.params["MessageGroupId"]) == ("run-1-0", "g")
    attributes = call.params["MessageAttributes"]
    assert attributes["Tickwork-Run-Id"]["StringValue"] == "run-1" and attributes["Tickwork-Attempt"] == {
        "DataType": "Number", "StringValue": "2"}
    assert call.size == 4 + sum(len(k) + len(v["DataType"]) + len(v["StringValue"]) for k, v in attributes.items())


def test_judging_keeps_a_services_failure_and_applies_the_rules_to_an_answer() -> None:
    target = AwsTarget(TargetKind.AWS_LAMBDA, None, None, None, 30.0)  # type: ignore[arg-type]
    ruled = StartedExecution("r", "j", "t", AT, 1, {}, {}, success={"body_contains": "done"})
    failed = Outcome(200, "done", "function error (Unhandled)", 5, failure=FailureKind.TRANSIENT_STATUS)
    assert target.judge(ruled, failed) == failed
    assert target.judge(ruled, Outcome(200, "done", None, 5, failure=None)).succeeded
    judged = target.judge(ruled, Outcome(200, "not yet", None, 5, failure=None))
    assert judged.failure is FailureKind.SUCCESS_RULE
