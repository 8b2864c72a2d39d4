"""The AWS kinds of target (tickwork.targets.base.Target): one per service, each made per executor invocation.

Preparing a run (ahead of its instant, within its attempt's time) reads its target spec, renders its input (the
placeholders, its secrets), builds the call and checks its size as sent, and gets the client of the job's role
(the session assumed or kept, the client's connections kept); the call alone is left for the instant
(tickwork.targets.aws.calls). Judging applies the job's success rules to what the service answered (its HTTP
status; a synchronous Lambda's payload as the body); a failure the service reported stands.
"""
from __future__ import annotations

import json
import time
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, Callable

from tickwork.errors import InvalidInputError, SealError, SecretHostError, UnknownSecretError
from tickwork.http.delivery import DEFAULT_TIMEOUT_SECONDS
from tickwork.http.redaction import redact, spellings
from tickwork.interfaces import Attempt
from tickwork.models import StartedExecution
from tickwork.outcome import Failure, FailureKind, Outcome
from tickwork.rules import success
from tickwork.secrets.outgoing import TenantSecrets
from tickwork.targets.aws import failures, rendering, services
from tickwork.targets.aws.calls import CallAttempt
from tickwork.targets.aws.clients import Clients
from tickwork.targetspec.aws import AwsTargetSpec
from tickwork.vocab import TargetKind


@dataclass
class AwsTarget:
    """`clients`: the environment's, kept warm; `calls`: the threads the environment makes calls on; `ceiling`:
    the longest an attempt may take (settings.max_request_timeout_seconds)."""

    kind: TargetKind
    clients: Clients
    secrets: TenantSecrets
    calls: Executor
    ceiling: float
    clock: Callable[[], float] = time.time

    def prepare(self, run: StartedExecution) -> Attempt:
        try:
            spec = AwsTargetSpec.from_dict(run.target)
        except InvalidInputError as exc:
            return _refused(f"{exc.field}: {exc.message}")
        if spec.kind is not self.kind:
            return _refused(f"target.arn is not the ARN of a {self.kind.value} target")
        now, timeout = self.clock(), min(spec.timeout_seconds or DEFAULT_TIMEOUT_SECONDS, self.ceiling)
        started = run.attempt_started_at.timestamp() if run.attempt_started_at is not None else now
        left = started + timeout - now
        if left <= 0:
            return CallAttempt.failed(Failure(FailureKind.TIMEOUT, "not called: the attempt's time ran out first"))
        rendered = self._render(spec, run)
        if isinstance(rendered, Failure):
            return CallAttempt.failed(rendered)
        text, hidden = rendered
        call = services.build(spec, text, run)
        if isinstance(call, Failure):
            return CallAttempt.failed(call)
        if call.size > spec.payload_limit:
            return _refused(f"the {call.counted} is {call.size} bytes as rendered, over the {spec.payload_limit} "
                            f"{call.action} takes")
        client = self.clients.client(spec.role_arn, run.tenant_id, call.service, spec.region, now + left)
        if isinstance(client, Failure):
            return CallAttempt.failed(client)
        return CallAttempt(lambda: self._invoke(client, call, spec, run, hidden), self.calls,
                           time.monotonic() + left, call.action)

    def judge(self, run: StartedExecution, outcome: Outcome) -> Outcome:
        return outcome if outcome.failure is not None else success.judge(run.success, outcome)

    def _render(self, spec: AwsTargetSpec, run: StartedExecution) -> tuple[str, tuple[str, ...]] | Failure:
        """The input as sent, and how its secrets are spelled (to be redacted from what is kept of the answer)."""
        try:
            values = self.secrets.unbound_values(run.tenant_id, rendering.secret_names(spec.input))
            text, used = rendering.render(spec.input, rendering.Context.of(run), values)
        except UnknownSecretError as exc:
            return Failure(FailureKind.UNKNOWN_SECRET, exc.message)
        except SealError:
            return Failure(FailureKind.REFUSED, "refused: a stored secret does not decrypt")
        except SecretHostError as exc:
            return Failure(FailureKind.REFUSED, f"refused: {exc.message}")
        return text, spellings([values[name] for name in sorted(used)])

    def _invoke(self, client: Any, call: services.ServiceCall, spec: AwsTargetSpec, run: StartedExecution,
                hidden: tuple[str, ...]) -> Outcome:
        try:
            answer = call.read(getattr(client, call.operation)(**call.params))
        except Exception as exc:  # botocore's errors and the connection's: classified, never raised
            if failures.expired(exc):
                self.clients.forget(spec.role_arn, run.tenant_id)
            elif failures.error_code(exc) in call.already:  # an earlier attempt made the call
                return Outcome(failures.http_status(exc), json.dumps({"already": failures.error_code(exc)}), None, 0,
                               failure=None)
            return Outcome.failed(failures.of_exception(exc, call.action, spec.role_arn))
        body = redact(answer.body, hidden) if answer.body and hidden else answer.body
        if answer.failure is not None:
            return Outcome(answer.status_code, body, answer.failure.error, 0, failure=answer.failure.kind)
        return Outcome(answer.status_code, body, None, 0, failure=None)


def _refused(why: str) -> CallAttempt:
    return CallAttempt.failed(Failure(FailureKind.REFUSED, f"refused: {why}"))
