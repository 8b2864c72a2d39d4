"""The AWS target spec (tickwork.targetspec.aws): EventBridge Scheduler's Target, each error naming its field."""
from __future__ import annotations

from typing import Any

import pytest

from tickwork.errors import InvalidInputError
from tickwork.targetspec.aws import DEFAULT_INPUT, AwsTargetSpec, InvocationType
from tickwork.vocab import TargetKind

ROLE = "arn:aws:iam::123456789012:role/tickwork-target-orders"
QUEUE = "arn:aws:sqs:us-east-1:123456789012:orders"
FIFO = "arn:aws:sqs:us-east-1:123456789012:orders.fifo"
BUS = "arn:aws:events:eu-west-1:123456789012:event-bus/default"
FUNCTION = "arn:aws:lambda:us-east-1:123456789012:function:tick:live"
MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:nightly"
TOPIC = "arn:aws:sns:us-east-1:210987654321:alerts"
EVENTS = {"eventbridge_parameters": {"detail_type": "tick", "source": "tickwork"}}


@pytest.mark.parametrize(("arn", "extra", "kind"), [
    (QUEUE, {}, TargetKind.AWS_SQS), (TOPIC, {}, TargetKind.AWS_SNS), (BUS, EVENTS, TargetKind.AWS_EVENTBRIDGE),
    (FUNCTION, {}, TargetKind.AWS_LAMBDA), (MACHINE, {}, TargetKind.AWS_STEP_FUNCTIONS),
])
def test_the_kind_is_the_arns_service(arn: str, extra: dict[str, Any], kind: TargetKind) -> None:
    spec = AwsTargetSpec.from_dict({"arn": arn, "role_arn": ROLE, **extra})
    assert (spec.kind, spec.input, spec.timeout_seconds) == (kind, DEFAULT_INPUT, None)
    assert AwsTargetSpec.from_dict(spec.to_dict()) == spec


def test_its_parts_come_from_its_arn() -> None:
    spec = AwsTargetSpec.from_dict({"arn": BUS, "role_arn": ROLE, **EVENTS})
    assert (spec.partition, spec.region, spec.account, spec.resource) == ("aws", "eu-west-1", "123456789012",
                                                                          "event-bus/default")


def test_a_full_target_is_kept_whole() -> None:
    given = {"arn": FIFO, "role_arn": ROLE, "input": '{"at": "<aws.scheduler.scheduled-time>"}',
             "timeout_seconds": 5, "sqs_parameters": {"message_group_id": "g1"}}
    spec = AwsTargetSpec.from_dict(given)
    assert spec.fifo and spec.sqs_parameters.message_group_id == "g1" and spec.timeout_seconds == 5.0
    assert spec.to_dict() == {**given, "timeout_seconds": 5.0}


def test_lambda_invokes_asynchronously_unless_told() -> None:
    assert AwsTargetSpec.from_dict({"arn": FUNCTION, "role_arn": ROLE}).lambda_parameters.invocation_type \
        is InvocationType.EVENT
    told = AwsTargetSpec.from_dict({"arn": FUNCTION, "role_arn": ROLE,
                                    "lambda_parameters": {"invocation_type": "RequestResponse"}})
    assert told.lambda_parameters.invocation_type is InvocationType.REQUEST_RESPONSE
    assert told.payload_limit == 6 * 1024 * 1024 and AwsTargetSpec.from_dict(
        {"arn": MACHINE, "role_arn": ROLE}).payload_limit == 256 * 1024


@pytest.mark.parametrize(("given", "field", "says"), [
    ("not an object", "target", "must be an object"),
    ({"role_arn": ROLE}, "target.arn", "required"),
    ({"arn": "arn:aws:s3:::bucket", "role_arn": ROLE}, "target.arn", "ARN of a Lambda function"),
    ({"arn": "arn:aws:dynamodb:us-east-1:123456789012:table/t", "role_arn": ROLE}, "target.arn", "SQS queue"),
    ({"arn": "arn:aws:lambda:us-east-1:123456789012:layer:x", "role_arn": ROLE}, "target.arn", "function:NAME"),
    ({"arn": "arn:aws:sns:us-east-1:123456789012:alerts.fifo", "role_arn": ROLE}, "target.arn", "FIFO topics"),
    ({"arn": QUEUE}, "target.role_arn", "required"),
    ({"arn": QUEUE, "role_arn": "arn:aws:iam::123456789012:user/me"}, "target.role_arn", "IAM role"),
    ({"arn": QUEUE, "role_arn": ROLE, "input": ""}, "target.input", "non-empty"),
    ({"arn": QUEUE, "role_arn": ROLE, "timeout_seconds": 0}, "target.timeout_seconds", "more than 0"),
    ({"arn": QUEUE, "role_arn": ROLE, "timeout_seconds": True}, "target.timeout_seconds", "number"),
    ({"arn": QUEUE, "role_arn": ROLE, "retry_policy": {}}, "target.retry_policy", "job's retry policy"),
    ({"arn": QUEUE, "role_arn": ROLE, "dead_letter_config": {}}, "target.dead_letter_config", "not supported"),
    ({"arn": QUEUE, "role_arn": ROLE, "url": "x"}, "target.url", "unknown field"),
    ({"arn": FIFO, "role_arn": ROLE}, "target.sqs_parameters.message_group_id", "FIFO"),
    ({"arn": QUEUE, "role_arn": ROLE, "sqs_parameters": {"message_group_id": "a b"}},
     "target.sqs_parameters.message_group_id", "punctuation"),
    ({"arn": QUEUE, "role_arn": ROLE, "sqs_parameters": {"group": "g"}}, "target.sqs_parameters.group", "unknown"),
    ({"arn": QUEUE, "role_arn": ROLE, **EVENTS}, "target.eventbridge_parameters", "only for an EventBridge"),
    ({"arn": BUS, "role_arn": ROLE}, "target.eventbridge_parameters", "required"),
    ({"arn": BUS, "role_arn": ROLE, "eventbridge_parameters": {"detail_type": "t", "source": "aws.ec2"}},
     "target.eventbridge_parameters.source", "aws."),
    ({"arn": BUS, "role_arn": ROLE, "eventbridge_parameters": {"source": "s"}},
     "target.eventbridge_parameters.detail_type", "required"),
    ({"arn": FUNCTION, "role_arn": ROLE, "lambda_parameters": {"invocation_type": "DryRun"}},
     "target.lambda_parameters.invocation_type", "Event or RequestResponse"),
    ({"arn": MACHINE, "role_arn": ROLE, "lambda_parameters": {}}, "target.lambda_parameters", "only for a Lambda"),
])
def test_what_is_refused_names_its_field(given: Any, field: str, says: str) -> None:
    with pytest.raises(InvalidInputError) as raised:
        AwsTargetSpec.from_dict(given)
    assert raised.value.field == field and says in raised.value.message, raised.value.message
