"""The Target contract's harnesses of the AWS kinds: moto's server, behind a recording forwarder (tests/aws.py).

Each kind calls a resource made in moto for it (a queue, a topic, an event bus, a state machine, a function). What
moto cannot do on demand the forwarder does: a `transient` run is answered 503, as AWS answers when unavailable,
and a `silent` one is never answered. A `final` run calls a resource that does not exist (moto answers 400 or 404:
a retry would get the same; for Lambda the forwarder answers Lambda's 404, since moto without Docker invokes any
function name); a `refused` run names a role outside the deployment's pattern; an `unknown_secret`
run's input names a secret its tenant lacks.
"""
from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Iterator, Mapping

from tests import aws
from tickwork.http.connections import Connections
from tickwork.models import StartedExecution
from tickwork.secrets.outgoing import TenantSecrets
from tickwork.store.jobs import TARGET_STAND_IN
from tickwork.store.tenants import create_tenant
from tickwork.targets import kinds
from tickwork.vocab import TargetKind
from tickwork.wiring import Services


def _queue(moto: str) -> str:
    sqs = aws.admin(moto, "sqs")
    url = sqs.create_queue(QueueName=aws.unique("queue"))["QueueUrl"]
    return str(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"])


def _topic(moto: str) -> str:
    return str(aws.admin(moto, "sns").create_topic(Name=aws.unique("topic"))["TopicArn"])


def _bus(moto: str) -> str:
    return str(aws.admin(moto, "events").create_event_bus(Name=aws.unique("bus"))["EventBusArn"])


RESOURCES: dict[TargetKind, Callable[[str], str]] = {
    TargetKind.AWS_SQS: _queue, TargetKind.AWS_SNS: _topic, TargetKind.AWS_EVENTBRIDGE: _bus,
    TargetKind.AWS_STEP_FUNCTIONS: aws.make_state_machine, TargetKind.AWS_LAMBDA: aws.make_lambda,
}
PARAMETERS: dict[TargetKind, dict[str, Any]] = {
    TargetKind.AWS_EVENTBRIDGE: {"eventbridge_parameters": {"detail_type": "tick", "source": "tickwork.tests"}},
    TargetKind.AWS_LAMBDA: {"lambda_parameters": {"invocation_type": "RequestResponse"}},
}


class AwsHarness:
    rejecting_rules: Mapping[str, Any] | None = {"status_codes": [201]}  # the services answer 200 (Lambda: 200)

    def __init__(self, kind: TargetKind, services: Services, forwarder: aws.Forwarder, timeout: float) -> None:
        self.kind, self.forwarder, self.timeout = kind, forwarder, timeout
        self.arn = RESOURCES[kind](forwarder.moto)
        self.missing = self.arn[:-4] + "zzzz"  # the same kind of ARN, of nothing
        access = kinds.AwsAccess(aws.clients(forwarder.url, sts_endpoint=forwarder.moto), ThreadPoolExecutor(8))
        settings = services.settings
        self.target = kinds.KINDS[kind](kinds.Means(settings, TenantSecrets(services), lambda run: None,
                                                     Connections(), access))
        with services.db.connection() as conn:
            self.tenant_id = create_tenant(conn, f"contract-{uuid.uuid4().hex[:8]}")

    def run(self, case: Any, *, started_ago: float = 0.0, success: Mapping[str, Any] | None = None
            ) -> StartedExecution:
        text = aws.PROBE_INPUT % case.value
        if case.value == "unknown_secret":
            text = text[:-1] + ', "key": "${secrets.MISSING}"}'
        spec = {"arn": self.missing if case.value == "final" else self.arn,
                "role_arn": aws.OTHER_ROLE_ARN if case.value == "refused" else aws.ROLE_ARN,
                "input": text, "timeout_seconds": self.timeout, **PARAMETERS.get(self.kind, {})}
        now = datetime.now(timezone.utc)
        return StartedExecution(str(uuid.uuid4()), str(uuid.uuid4()), self.tenant_id, now, 1, dict(TARGET_STAND_IN),
                                {}, target=spec, attempt_started_at=now - timedelta(seconds=started_ago),
                                success=dict(success) if success else None)

    def called(self) -> list[str]:
        return list(self.forwarder.run_ids)


def harness(kind: TargetKind, timeout: float) -> Callable[[Services, str], Iterator[AwsHarness]]:
    def made(services: Services, moto: str) -> Iterator[AwsHarness]:
        forwarder = aws.Forwarder(moto, {"final": aws.NO_SUCH_FUNCTION} if kind is TargetKind.AWS_LAMBDA else {})
        yield AwsHarness(kind, services, forwarder, timeout)
        forwarder.close()
    return made
