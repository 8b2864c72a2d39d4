"""A job's AWS target, shaped as EventBridge Scheduler's Target so that schedules carry over. Pure.

    {"arn": "arn:aws:sqs:us-east-1:123456789012:orders",
     "role_arn": "arn:aws:iam::123456789012:role/tickwork-target-orders",
     "input": "{\"at\": \"<aws.scheduler.scheduled-time>\"}",
     "sqs_parameters": {"message_group_id": "g1"}}

The fields are Scheduler's in snake case (`arn`, `role_arn`, `input`, `sqs_parameters`, `eventbridge_parameters`),
plus Tickwork's own: `lambda_parameters` (Scheduler always invokes asynchronously) and `timeout_seconds` (as a
request's). The kind of target is the ARN's service. What Scheduler has and Tickwork does not (a dead-letter
queue, its retry policy, Kinesis, ECS, SageMaker targets) is refused by name: retries are the job's retry policy.
`from_dict` raises InvalidInputError naming the field (`target.sqs_parameters.message_group_id`).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Mapping

from tickwork.errors import InvalidInputError
from tickwork.targetspec import arns
from tickwork.vocab import TargetKind

# The kind of an AWS target, by the service its ARN names.
AWS_KINDS = {"lambda": TargetKind.AWS_LAMBDA, "sqs": TargetKind.AWS_SQS, "sns": TargetKind.AWS_SNS,
             "events": TargetKind.AWS_EVENTBRIDGE, "states": TargetKind.AWS_STEP_FUNCTIONS}
# What a target without `input` sends: the run's identity, the same on every attempt (a Step Functions execution
# started again with another input would not be recognised as the same one).
DEFAULT_INPUT = ('{"execution_id": "<aws.scheduler.execution-id>", "schedule_arn": "<aws.scheduler.schedule-arn>", '
                 '"scheduled_time": "<aws.scheduler.scheduled-time>"}')
# What each service takes in one call at most, in bytes of what it counts (tickwork.targets.aws.services says what):
# SQS (a message's body and attributes) 1 MiB since August 2025; EventBridge (an entry: source, detail type, detail,
# resources) and Lambda's asynchronous invoke 1 MB since January 2026 (a synchronous one 6 MB); SNS 256 KiB by
# default, up to 1 MiB for a topic whose MaximumMessageSize says so (SNS refuses the rest, InvalidParameter);
# Step Functions 256 KiB of input.
MIB = 1024 * 1024
PAYLOAD_LIMITS = {TargetKind.AWS_SQS: MIB, TargetKind.AWS_EVENTBRIDGE: MIB, TargetKind.AWS_LAMBDA: MIB,
                  TargetKind.AWS_SNS: MIB, TargetKind.AWS_STEP_FUNCTIONS: 256 * 1024}
SYNCHRONOUS_LAMBDA_LIMIT = 6 * MIB
MAX_TIMEOUT_SECONDS = 900  # a synchronous Lambda invocation's longest; the deployment's own cap applies too

# The resource part of an ARN each kind calls (the names each service allows).
_RESOURCES = {
    TargetKind.AWS_LAMBDA: re.compile(r"^function:[A-Za-z0-9_-]{1,64}(:(\$LATEST|[A-Za-z0-9_-]{1,128}))?$"),
    TargetKind.AWS_SQS: re.compile(r"^[A-Za-z0-9_-]{1,75}(\.fifo)?$|^[A-Za-z0-9_-]{1,80}$"),
    TargetKind.AWS_SNS: re.compile(r"^[A-Za-z0-9_-]{1,256}$"),
    TargetKind.AWS_EVENTBRIDGE: re.compile(r"^event-bus/[A-Za-z0-9._/-]{1,256}$"),
    TargetKind.AWS_STEP_FUNCTIONS: re.compile(r"^stateMachine:[A-Za-z0-9_-]{1,80}(:[A-Za-z0-9_-]{1,80})?$"),
}
_WHAT = {
    TargetKind.AWS_LAMBDA: "a Lambda function (function:NAME[:QUALIFIER])",
    TargetKind.AWS_SQS: "an SQS queue",
    TargetKind.AWS_SNS: "an SNS topic (FIFO topics are not supported yet)",
    TargetKind.AWS_EVENTBRIDGE: "an EventBridge event bus (event-bus/NAME)",
    TargetKind.AWS_STEP_FUNCTIONS: "a Step Functions state machine (stateMachine:NAME)",
}
_KNOWN_ARNS = ("the ARN of a Lambda function, an SQS queue, an SNS topic, an EventBridge event bus or a Step "
               "Functions state machine")
# Scheduler's fields that Tickwork does not take, and why.
_NOT_TAKEN = {
    "dead_letter_config": "failed runs are kept in the job's history and notified (notify), not sent to a queue",
    "retry_policy": "retries are the job's retry policy (retry)",
    "kinesis_parameters": "Kinesis targets are not supported",
    "ecs_parameters": "ECS targets are not supported",
    "sage_maker_pipeline_parameters": "SageMaker targets are not supported",
}
_MESSAGE_GROUP_ID = re.compile(r"^[!-~]{1,128}$")  # SQS: alphanumerics and punctuation


class InvocationType(StrEnum):
    EVENT = "Event"  # accepted (202) is a successful attempt; the function runs on its own
    REQUEST_RESPONSE = "RequestResponse"  # the attempt is the function's run: a FunctionError is a failed one


@dataclass(frozen=True)
class SqsParameters:
    message_group_id: str | None = None  # required for a FIFO queue


@dataclass(frozen=True)
class EventBridgeParameters:
    detail_type: str
    source: str


@dataclass(frozen=True)
class LambdaParameters:
    invocation_type: InvocationType = InvocationType.EVENT


@dataclass(frozen=True)
class AwsTargetSpec:
    arn: str
    role_arn: str
    kind: TargetKind
    input: str = DEFAULT_INPUT
    timeout_seconds: float | None = None  # None: the request default (tickwork.http.delivery)
    sqs_parameters: SqsParameters = field(default_factory=SqsParameters)
    eventbridge_parameters: EventBridgeParameters | None = None  # required for an event bus
    lambda_parameters: LambdaParameters = field(default_factory=LambdaParameters)

    @property
    def partition(self) -> str:
        return _parsed(self.arn).partition

    @property
    def region(self) -> str:
        return _parsed(self.arn).region

    @property
    def account(self) -> str:
        return _parsed(self.arn).account

    @property
    def resource(self) -> str:
        return _parsed(self.arn).resource

    @property
    def payload_limit(self) -> int:
        if self.lambda_parameters.invocation_type is InvocationType.REQUEST_RESPONSE:
            return SYNCHRONOUS_LAMBDA_LIMIT
        return PAYLOAD_LIMITS[self.kind]

    @property
    def fifo(self) -> bool:
        return self.kind is TargetKind.AWS_SQS and self.arn.endswith(".fifo")

    @classmethod
    def from_dict(cls, given: Any, path: str = "target") -> AwsTargetSpec:
        data = _mapping(given, path)
        for key in data.keys() & _NOT_TAKEN.keys():
            raise InvalidInputError(f"{path}.{key}", f"not supported: {_NOT_TAKEN[key]}")
        _known(data, path, {"arn", "role_arn", "input", "timeout_seconds", "sqs_parameters",
                            "eventbridge_parameters", "lambda_parameters"})
        arn, kind = _target_arn(data.get("arn"), f"{path}.arn")
        role_arn = _text(data.get("role_arn"), f"{path}.role_arn", arns.MAX_ARN_CHARS)
        if not arns.is_role_arn(role_arn):
            raise InvalidInputError(f"{path}.role_arn", "must be an IAM role's ARN (arn:aws:iam::ACCOUNT:role/NAME)")
        text = DEFAULT_INPUT if data.get("input") is None else _text(data["input"], f"{path}.input", None)
        spec = cls(arn, role_arn, kind, text, _timeout(data.get("timeout_seconds"), f"{path}.timeout_seconds"),
                   _sqs(data, kind, path), _eventbridge(data, kind, path), _lambda(data, kind, path))
        if spec.fifo and spec.sqs_parameters.message_group_id is None:
            raise InvalidInputError(f"{path}.sqs_parameters.message_group_id", "required for a FIFO queue")
        return spec

    def to_dict(self) -> dict[str, Any]:
        """As `from_dict` takes it (what is stored and shown)."""
        shown: dict[str, Any] = {"arn": self.arn, "role_arn": self.role_arn, "input": self.input}
        if self.timeout_seconds is not None:
            shown["timeout_seconds"] = self.timeout_seconds
        if self.sqs_parameters.message_group_id is not None:
            shown["sqs_parameters"] = {"message_group_id": self.sqs_parameters.message_group_id}
        if self.eventbridge_parameters is not None:
            shown["eventbridge_parameters"] = {"detail_type": self.eventbridge_parameters.detail_type,
                                               "source": self.eventbridge_parameters.source}
        if self.kind is TargetKind.AWS_LAMBDA:
            shown["lambda_parameters"] = {"invocation_type": self.lambda_parameters.invocation_type.value}
        return shown


def _parsed(arn: str) -> arns.Arn:
    parsed = arns.parse(arn)
    assert parsed is not None, "a spec's ARN was parsed when it was made"
    return parsed


def _target_arn(given: Any, path: str) -> tuple[str, TargetKind]:
    arn = _text(given, path, arns.MAX_ARN_CHARS)
    parsed = arns.parse(arn)
    kind = AWS_KINDS.get(parsed.service) if parsed else None
    if parsed is None or kind is None:
        raise InvalidInputError(path, f"must be {_KNOWN_ARNS}")
    if not _RESOURCES[kind].match(parsed.resource):
        raise InvalidInputError(path, f"must be the ARN of {_WHAT[kind]}")
    return arn, kind


def _sqs(data: Mapping[str, Any], kind: TargetKind, path: str) -> SqsParameters:
    given = _parameters(data, "sqs_parameters", kind, TargetKind.AWS_SQS, path)
    if given is None:
        return SqsParameters()
    here = f"{path}.sqs_parameters"
    _known(given, here, {"message_group_id"})
    group = given.get("message_group_id")
    if group is not None and not (isinstance(group, str) and _MESSAGE_GROUP_ID.match(group)):
        raise InvalidInputError(f"{here}.message_group_id", "must be 1 to 128 letters, digits or punctuation")
    return SqsParameters(group)


def _eventbridge(data: Mapping[str, Any], kind: TargetKind, path: str) -> EventBridgeParameters | None:
    here = f"{path}.eventbridge_parameters"
    given = _parameters(data, "eventbridge_parameters", kind, TargetKind.AWS_EVENTBRIDGE, path)
    if given is None:
        if kind is TargetKind.AWS_EVENTBRIDGE:
            raise InvalidInputError(here, "required for an event bus (detail_type and source)")
        return None
    _known(given, here, {"detail_type", "source"})
    detail_type = _text(given.get("detail_type"), f"{here}.detail_type", 128)
    source = _text(given.get("source"), f"{here}.source", 256)
    if source.startswith("aws."):
        raise InvalidInputError(f"{here}.source", "must not start with aws. (EventBridge keeps those for AWS)")
    return EventBridgeParameters(detail_type, source)


def _lambda(data: Mapping[str, Any], kind: TargetKind, path: str) -> LambdaParameters:
    given = _parameters(data, "lambda_parameters", kind, TargetKind.AWS_LAMBDA, path)
    if given is None:
        return LambdaParameters()
    here = f"{path}.lambda_parameters"
    _known(given, here, {"invocation_type"})
    invocation = given.get("invocation_type", InvocationType.EVENT.value)
    if invocation not in {t.value for t in InvocationType}:
        raise InvalidInputError(f"{here}.invocation_type", "must be Event or RequestResponse")
    return LambdaParameters(InvocationType(invocation))


def _parameters(data: Mapping[str, Any], name: str, kind: TargetKind, only: TargetKind, path: str
                ) -> Mapping[str, Any] | None:
    given = data.get(name)
    if given is None:
        return None
    if kind is not only:
        raise InvalidInputError(f"{path}.{name}", f"only for {_WHAT[only]}")
    return _mapping(given, f"{path}.{name}")


def _timeout(given: Any, path: str) -> float | None:
    if given is None:
        return None
    if isinstance(given, bool) or not isinstance(given, (int, float)) or not math.isfinite(given):
        raise InvalidInputError(path, "must be a number of seconds")
    if not 0 < given <= MAX_TIMEOUT_SECONDS:
        raise InvalidInputError(path, f"must be more than 0 and at most {MAX_TIMEOUT_SECONDS}")
    return float(given)


def _mapping(given: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(given, Mapping):
        raise InvalidInputError(path, "must be an object")
    return given


def _known(data: Mapping[str, Any], path: str, fields: set[str]) -> None:
    for key in data:
        if key not in fields:
            raise InvalidInputError(f"{path}.{key}", f"unknown field (known: {', '.join(sorted(fields))})")


def _text(given: Any, path: str, most: int | None) -> str:
    if not isinstance(given, str) or not given:
        raise InvalidInputError(path, "required: a non-empty string")
    if most is not None and len(given) > most:
        raise InvalidInputError(path, f"at most {most} characters")
    return given
