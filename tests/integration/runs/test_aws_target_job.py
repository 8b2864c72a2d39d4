"""A job with an AWS target, end to end: created through the API, its run handed over by the poller and sent by the
executor to an SQS queue of moto's server (tests/aws.py), its history read back through the API. Clocks pinned."""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any, Iterator

import pytest

from tests import aws
from tests.integration.api_client import Api, use_clock
from tests.integration.helpers import executor_at
from tests.support import FakeClock
from tickwork.dispatch.poller import Poller
from tickwork.targets.aws.target import AwsTarget
from tickwork.timeutil import to_ms
from tickwork.vocab import TargetKind
from tickwork.wiring import Services

T0 = datetime(2026, 11, 30, 12, 0, 1, tzinfo=timezone.utc)
DUE = datetime(2026, 11, 30, 12, 0, 5, tzinfo=timezone.utc)


@pytest.fixture
def queue(moto_endpoint: str) -> Iterator[tuple[Any, str, str]]:
    sqs = aws.admin(moto_endpoint, "sqs")
    url = sqs.create_queue(QueueName=aws.unique("orders"))["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    yield sqs, url, arn
    sqs.delete_queue(QueueUrl=url)


def test_a_job_created_with_an_sqs_target_sends_its_run_to_the_queue(
    api: Api, services: Services, moto_endpoint: str, queue: tuple[Any, str, str],
) -> None:
    sqs, url, arn = queue
    use_clock(lambda: T0.timestamp())
    target = {"arn": arn, "role_arn": aws.ROLE_ARN, "input": '{"run": "<aws.scheduler.execution-id>"}'}
    job = api.call("POST", "/jobs", {"name": "orders", "schedule": "*/5 * * * * *", "target": target}).body
    shown = {**dict.fromkeys(("timeout_seconds", "sqs_parameters", "eventbridge_parameters", "lambda_parameters")),
             **target}
    assert (job["request"], job["target"], job["next_run_at"]) == (None, shown, "2026-11-30T12:00:05.000Z"), job
    assert api.call("GET", f"/jobs/{job['id']}").body["target"] == shown

    services.invoker.dispatches.clear()  # type: ignore[union-attr]
    Poller(services).tick(to_ms(DUE))
    (dispatch,) = services.invoker.dispatches  # type: ignore[union-attr]
    executor = executor_at(services, FakeClock(DUE))
    with ThreadPoolExecutor(2) as calls:  # the executor's SQS kind, its clients aimed at moto's server
        executor.targets[TargetKind.AWS_SQS] = AwsTarget(TargetKind.AWS_SQS, aws.clients(moto_endpoint),
                                                         executor.secrets, calls, 30.0)
        executor.run([dispatch])

    (message,) = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"], WaitTimeSeconds=1)["Messages"]
    assert json.loads(message["Body"]) == {"run": dispatch.execution_id}
    history = api.call("GET", f"/executions/{dispatch.execution_id}").body
    (attempt,) = history["attempts"]
    assert (history["status"], attempt["number"], attempt["status_code"], attempt["error"]) == (
        "succeeded", 1, 200, None), history
