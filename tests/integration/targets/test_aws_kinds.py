"""Each AWS kind of target against moto's server (tests/aws.py): what arrives where the service puts it.

moto runs no Lambda code without Docker: an invocation is checked by what reached moto's Lambda endpoint (the
rendered payload, which moto echoes as the function's answer, and the ClientContext carrying the run's ids), and a
function error by Lambda's answer to one (X-Amz-Function-Error), injected by the forwarder.
"""
from __future__ import annotations

import base64
import json
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any, Iterator

import pytest

from tests import aws
from tickwork.dueindex.index import DueIndex
from tickwork.models import StartedExecution
from tickwork.outcome import FailureKind, Outcome
from tickwork.scope import Scope
from tickwork.secrets.outgoing import TenantSecrets
from tickwork.store.tenants import create_tenant
from tickwork.store.jobs import TARGET_STAND_IN
from tickwork.targets.aws.clients import Clients
from tickwork.targets.aws.target import AwsTarget
from tickwork.targets.base import kind_of
from tickwork.tenant import secrets as tenant_secrets
from tickwork.wiring import Services

AT = datetime(2026, 1, 29, 9, 0, 5, tzinfo=timezone.utc)
TOKEN = "tk-9f8e7d6c5b4a"


def _scope(services: Services, tenant_id: str) -> Scope:
    return Scope(services.db, DueIndex(services.redis, services.settings.namespace), services.settings, tenant_id,
                 datetime.now(timezone.utc), services.keyring)


@pytest.fixture
def tenant(services: Services) -> str:
    with services.db.connection() as conn:
        tenant_id = create_tenant(conn, "aws")
    tenant_secrets.put_secret(_scope(services, tenant_id), "TOKEN", TOKEN)
    return tenant_id


@pytest.fixture
def calls() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(4) as pool:
        yield pool


class Runner:
    def __init__(self, services: Services, tenant: str, clients: Clients, calls: ThreadPoolExecutor) -> None:
        self.secrets, self.tenant, self.clients, self.calls = TenantSecrets(services), tenant, clients, calls

    def run(self, target: dict[str, Any], attempt: int = 1, replay_count: int = 0, run_id: str = ""
            ) -> StartedExecution:
        spec = {"role_arn": aws.ROLE_ARN, **target}
        return StartedExecution(run_id or str(uuid.uuid4()), "job-7", self.tenant, AT, attempt,
                                dict(TARGET_STAND_IN), {}, target=spec, attempt_started_at=datetime.now(timezone.utc),
                                replay_count=replay_count)

    def attempt(self, run: StartedExecution) -> Outcome:
        target = AwsTarget(kind_of(run), self.clients, self.secrets, self.calls, 30.0)
        prepared = target.prepare(run)
        prepared.fire()
        return target.judge(run, prepared.complete())


@pytest.fixture
def runner(services: Services, tenant: str, moto_endpoint: str, calls: ThreadPoolExecutor) -> Runner:
    return Runner(services, tenant, aws.clients(moto_endpoint), calls)


def _queue(moto: str, fifo: bool = False) -> tuple[str, str]:
    sqs = aws.admin(moto, "sqs")
    name = aws.unique("q") + (".fifo" if fifo else "")
    url = sqs.create_queue(QueueName=name, Attributes={"FifoQueue": "true"} if fifo else {})["QueueUrl"]
    return url, sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


def _received(moto: str, url: str) -> list[dict[str, Any]]:
    answer = aws.admin(moto, "sqs").receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                                    MessageAttributeNames=["All"], MessageSystemAttributeNames=["All"])
    return list(answer.get("Messages", []))


def test_an_sqs_message_arrives_rendered_with_the_runs_ids(runner: Runner, moto_endpoint: str) -> None:
    url, arn = _queue(moto_endpoint)
    text = ('{"run": "<aws.scheduler.execution-id>", "n": <aws.scheduler.attempt-number>, '
            '"at": "<aws.scheduler.scheduled-time>", "key": "${secrets.TOKEN}"}')
    run = runner.run({"arn": arn, "input": text})
    outcome = runner.attempt(run)
    assert outcome.succeeded and outcome.status_code == 200 and "MessageId" in (outcome.body or "")
    [message] = _received(moto_endpoint, url)
    assert json.loads(message["Body"]) == {"run": run.id, "n": 1, "at": "2026-01-29T09:00:05.000Z", "key": TOKEN}
    assert {name: value["StringValue"] for name, value in message["MessageAttributes"].items()} == {
        "Tickwork-Run-Id": run.id, "Tickwork-Job-Id": "job-7", "Tickwork-Attempt": "1",
        "Tickwork-Scheduled-For": "2026-01-29T09:00:05.000Z"}


def test_a_fifo_queue_gets_a_run_once_whatever_its_attempts_and_a_replay_again(runner: Runner,
                                                                                moto_endpoint: str) -> None:
    url, arn = _queue(moto_endpoint, fifo=True)
    target = {"arn": arn, "input": '{"n": <aws.scheduler.attempt-number>}', "sqs_parameters": {"message_group_id": "g"}}
    first = runner.run(target)
    # A retry after a send whose answer was lost: another attempt, another body, the same deduplication id.
    assert runner.attempt(first).succeeded and runner.attempt(runner.run(target, 2, run_id=first.id)).succeeded
    [message] = _received(moto_endpoint, url)
    assert message["Attributes"]["MessageDeduplicationId"] == f"{first.id}-0"
    assert message["Attributes"]["MessageGroupId"] == "g" and json.loads(message["Body"]) == {"n": 1}
    aws.admin(moto_endpoint, "sqs").delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert runner.attempt(runner.run(target, 3, replay_count=1, run_id=first.id)).succeeded
    [replayed] = _received(moto_endpoint, url)
    assert replayed["Attributes"]["MessageDeduplicationId"] == f"{first.id}-1"


def test_an_sns_message_is_published_with_the_runs_ids(runner: Runner, moto_endpoint: str) -> None:
    sns = aws.admin(moto_endpoint, "sns")
    topic = sns.create_topic(Name=aws.unique("t"))["TopicArn"]
    url, queue = _queue(moto_endpoint)
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue, Attributes={"RawMessageDelivery": "true"})
    run = runner.run({"arn": topic, "input": "tick <aws.scheduler.execution-id>"})
    outcome = runner.attempt(run)
    assert outcome.succeeded and "MessageId" in (outcome.body or "")
    [message] = _received(moto_endpoint, url)
    assert message["Body"] == f"tick {run.id}"
    assert message["MessageAttributes"]["Tickwork-Run-Id"]["StringValue"] == run.id


def test_an_eventbridge_event_is_put_on_the_bus_and_routed(runner: Runner, moto_endpoint: str) -> None:
    events = aws.admin(moto_endpoint, "events")
    bus = events.create_event_bus(Name=aws.unique("bus"))
    url, queue = _queue(moto_endpoint)
    rule = aws.unique("rule")
    events.put_rule(Name=rule, EventBusName=bus["EventBusArn"].split("/")[-1],
                    EventPattern=json.dumps({"source": ["tickwork.tests"]}))
    events.put_targets(Rule=rule, EventBusName=bus["EventBusArn"].split("/")[-1], Targets=[{"Id": "q", "Arn": queue}])
    run = runner.run({"arn": bus["EventBusArn"], "input": '{"run": "<aws.scheduler.execution-id>"}',
                      "eventbridge_parameters": {"detail_type": "tick", "source": "tickwork.tests"}})
    outcome = runner.attempt(run)
    assert outcome.succeeded and "EventId" in (outcome.body or "")
    [message] = _received(moto_endpoint, url)
    event = json.loads(message["Body"])
    assert (event["source"], event["detail-type"], event["detail"]) == ("tickwork.tests", "tick", {"run": run.id})
    assert event["time"].startswith("2026-01-29T09:00:05")


def test_a_step_functions_execution_is_started_once_per_run(runner: Runner, moto_endpoint: str) -> None:
    machine = aws.make_state_machine(moto_endpoint)
    target = {"arn": machine, "input": '{"n": <aws.scheduler.attempt-number>}'}
    first = runner.run(target)
    assert runner.attempt(first).succeeded
    # A retry (its input differs by its attempt number): ExecutionAlreadyExists for the run's name, a success.
    again = runner.attempt(runner.run(target, 2, run_id=first.id))
    assert again.succeeded and again.body == '{"already": "ExecutionAlreadyExists"}'
    executions = aws.admin(moto_endpoint, "stepfunctions").list_executions(stateMachineArn=machine)["executions"]
    assert [e["name"] for e in executions] == [f"{first.id}-0"]
    assert runner.attempt(runner.run(target, 3, replay_count=1, run_id=first.id)).succeeded
    executions = aws.admin(moto_endpoint, "stepfunctions").list_executions(stateMachineArn=machine)["executions"]
    assert sorted(e["name"] for e in executions) == [f"{first.id}-0", f"{first.id}-1"]


def test_a_lambda_function_is_invoked(services: Services, tenant: str, moto_endpoint: str,
                                      calls: ThreadPoolExecutor) -> None:
    forwarder = aws.Forwarder(moto_endpoint, {"failing": (200, {"X-Amz-Function-Error": "Unhandled"},
                                                          f'{{"errorMessage": "no {TOKEN}"}}'.encode())})
    try:
        runner = Runner(services, tenant, aws.clients(forwarder.url, sts_endpoint=moto_endpoint), calls)
        function = aws.make_lambda(moto_endpoint)
        accepted = runner.attempt(runner.run({"arn": function, "input": aws.PROBE_INPUT % "event"}))
        assert accepted.succeeded and accepted.status_code == 202
        sync = {"arn": function, "lambda_parameters": {"invocation_type": "RequestResponse"}}
        run = runner.run({**sync, "input": aws.PROBE_INPUT % "sync"})
        answered = runner.attempt(run)
        assert answered.succeeded and answered.status_code == 200
        assert json.loads(answered.body or "") == {"probe": f"sync/{run.id}"}  # moto echoes the payload it got
        context = json.loads(base64.b64decode(forwarder.headers[-1]["X-Amz-Client-Context"]))
        assert context["custom"]["Tickwork-Run-Id"] == run.id
        failing = runner.run({**sync, "input": (aws.PROBE_INPUT % "failing")[:-1] + ', "k": "${secrets.TOKEN}"}'})
        failed = runner.attempt(failing)
        assert failed.failure is FailureKind.TRANSIENT_STATUS and failed.retryable and failed.status_code == 200
        assert failed.error == "function error (Unhandled)" and failed.body == '{"errorMessage": "no ***"}'
        assert forwarder.run_ids == [forwarder.run_ids[0], run.id, failing.id]
    finally:
        forwarder.close()


def test_boto3s_endpoint_setting_points_the_clients_at_moto(runner: Runner, moto_endpoint: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    runner.clients = Clients(runner.clients.sessions, read_timeout=30.0)  # no endpoint_url: boto3's own resolution
    url, arn = _queue(moto_endpoint)
    assert runner.attempt(runner.run({"arn": arn})).succeeded
    assert len(_received(moto_endpoint, url)) == 1


def test_a_secret_bound_to_hosts_is_never_sent_to_an_aws_target(services: Services, runner: Runner,
                                                                 moto_endpoint: str) -> None:
    tenant_secrets.put_secret(_scope(services, runner.tenant), "HOSTED", "v4lue-9",
                     allowed_hosts=["api.example.com"])
    url, arn = _queue(moto_endpoint)
    outcome = runner.attempt(runner.run({"arn": arn, "input": "${secrets.HOSTED}"}))
    assert outcome.failure is FailureKind.REFUSED and "HOSTED" in (outcome.error or "") and not outcome.retryable
    assert _received(moto_endpoint, url) == []


def test_an_input_over_the_services_limit_once_rendered_is_refused_uncalled(runner: Runner,
                                                                             moto_endpoint: str) -> None:
    machine = aws.make_state_machine(moto_endpoint)
    around = '{"pad": "", "run": "<aws.scheduler.execution-id>"}'  # 28 characters that are 36 once rendered
    text = around.replace('""', '"' + "x" * (256 * 1024 - len(around)) + '"')
    assert len(text) == 256 * 1024  # the template fits; rendered, it is 8 bytes over
    outcome = runner.attempt(runner.run({"arn": machine, "input": text}))
    assert outcome.failure is FailureKind.REFUSED and "262144" in (outcome.error or "")
    assert aws.admin(moto_endpoint, "stepfunctions").list_executions(stateMachineArn=machine)["executions"] == []
