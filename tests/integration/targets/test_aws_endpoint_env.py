"""The executor's AWS clients go where boto3's standard variables say (AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_<SERVICE>):
that is how `make dev` and docs/local.md point the AWS kinds at moto's server, with nothing of Tickwork's own.

The clients are made as tickwork.runs.executor.aws_access makes them (no endpoint given, the executor's STS client
from executor_sts), and botocore resolves the endpoint from the environment when each client is made.
"""
from __future__ import annotations

import time
from typing import Any

import pytest

from tests import aws
from tickwork.targets.aws.clients import Clients
from tickwork.targets.aws.credentials import RoleSessions, executor_sts

DEADLINE_SECONDS = 30.0  # for AssumeRole, on RoleSessions' clock (the wall clock: the calls are real)
# boto3's client name, and the suffix of its variable (the service id in upper snake case, not the client's name).
SERVICE_VARIABLES = {"sts": "STS", "sqs": "SQS", "sns": "SNS", "events": "EVENTBRIDGE", "stepfunctions": "SFN",
                     "lambda": "LAMBDA"}
UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing answers there


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """The executor's own credentials and region, as Lambda gives them; no endpoint variable yet."""
    for name in ("AWS_ENDPOINT_URL", *(f"AWS_ENDPOINT_URL_{v}" for v in SERVICE_VARIABLES.values())):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", aws.REGION)
    return monkeypatch


def _executors_clients() -> Clients:
    return Clients(RoleSessions(executor_sts, aws.ROLE_PATTERN), read_timeout=10.0)


def _executors_client(service: str) -> Any:
    """A client of the role, as the executor makes it for a run of the tenant's job."""
    return _executors_clients().client(aws.ROLE_ARN, "tenant-1", service, aws.REGION, time.time() + DEADLINE_SECONDS)


def _send_and_read_back(moto: str) -> list[str]:
    queue = aws.admin(moto, "sqs").create_queue(QueueName=aws.unique("endpoint-env"))["QueueUrl"]
    sqs = _executors_client("sqs")
    sqs.send_message(QueueUrl=queue, MessageBody="tick")
    got = aws.admin(moto, "sqs").receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=1)
    return [m["Body"] for m in got.get("Messages", [])]


def test_aws_endpoint_url_sends_every_call_there(aws_env: pytest.MonkeyPatch, moto_endpoint: str) -> None:
    aws_env.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    assert _send_and_read_back(moto_endpoint) == ["tick"]  # AssumeRole and SendMessage both reached moto


def test_a_service_variable_wins_over_the_global_one(aws_env: pytest.MonkeyPatch, moto_endpoint: str) -> None:
    aws_env.setenv("AWS_ENDPOINT_URL", UNREACHABLE)
    aws_env.setenv("AWS_ENDPOINT_URL_STS", moto_endpoint)
    aws_env.setenv("AWS_ENDPOINT_URL_SQS", moto_endpoint)
    assert _send_and_read_back(moto_endpoint) == ["tick"]


@pytest.mark.parametrize(("service", "variable"), SERVICE_VARIABLES.items())
def test_each_kinds_client_reads_its_services_variable(aws_env: pytest.MonkeyPatch, moto_endpoint: str,
                                                        service: str, variable: str) -> None:
    aws_env.setenv("AWS_ENDPOINT_URL", UNREACHABLE)
    aws_env.setenv("AWS_ENDPOINT_URL_STS", moto_endpoint)
    aws_env.setenv(f"AWS_ENDPOINT_URL_{variable}", f"http://{service}.example:4566")
    if service == "sts":
        assert executor_sts().meta.endpoint_url == f"http://{service}.example:4566"
        return
    assert _executors_client(service).meta.endpoint_url == f"http://{service}.example:4566"
