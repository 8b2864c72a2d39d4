"""The Target contract (tickwork.targets.base), run against every registered kind of target.

Each kind brings a Harness: a real endpoint of its kind (HTTP: http.server on loopback, in a thread; the AWS kinds:
moto's server, tests/contract/aws_harnesses.py), the
Target the executor would make for it, and runs that make the endpoint succeed, answer a failure a retry may
mend, answer one a retry would only repeat, or not answer in time, and runs the deployment refuses. What each
must come to is the contract, the same for every kind; a kind registered without a Harness fails here.
"""
from __future__ import annotations

import threading
import time
import uuid
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from enum import StrEnum
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator, Mapping, Protocol

import pytest

from tests.contract import aws_harnesses
from tests.support import wait_for
from tickwork.http.connections import Connections
from tickwork.models import StartedExecution
from tickwork.outcome import FailureKind, Outcome
from tickwork.runs.executor import aws_access
from tickwork.secrets.outgoing import TenantSecrets
from tickwork.store.tenants import create_tenant
from tickwork.targets import kinds
from tickwork.targets.base import Target, kind_of
from tickwork.vocab import TargetKind
from tickwork.wiring import Services

TIMEOUT_SECONDS = 1.0  # a run's time, where a test waits it out
# How long a call that reached its endpoint takes to be seen there, at most (loopback, an idle machine or not).
SEEN_WITHIN_SECONDS = 5.0
# How long a test watches for a call that must not come.
QUIET_SECONDS = 0.2


class Case(StrEnum):
    SUCCEED = "succeed"
    TRANSIENT = "transient"  # the endpoint answers a failure that may pass (HTTP: 503)
    FINAL = "final"  # the endpoint answers a failure a retry would repeat (HTTP: 404)
    SILENT = "silent"  # the endpoint takes the call and never answers
    REFUSED = "refused"  # the deployment does not allow the target (HTTP: a port it does not send to)
    UNKNOWN_SECRET = "unknown_secret"  # the call names a secret its tenant does not have


# What each failing case comes to, whatever the kind.
FAILURES = {
    Case.TRANSIENT: FailureKind.TRANSIENT_STATUS,
    Case.FINAL: FailureKind.REJECTED_STATUS,
    Case.SILENT: FailureKind.TIMEOUT,
    Case.REFUSED: FailureKind.REFUSED,
    Case.UNKNOWN_SECRET: FailureKind.UNKNOWN_SECRET,
}


class Harness(Protocol):
    kind: TargetKind
    target: Target
    rejecting_rules: Mapping[str, Any] | None  # success rules that refuse what SUCCEED answers; None: no rules

    def run(self, case: Case, *, started_ago: float = 0.0, success: Mapping[str, Any] | None = None
            ) -> StartedExecution:
        """A run of `case`, its attempt started `started_ago` seconds ago, its time TIMEOUT_SECONDS."""
        ...

    def called(self) -> list[str]:
        """The run ids of the calls that reached the endpoint, in order."""
        ...


class HttpEndpoint:
    """Answers `/<status>` with that status and holds `/silent` until closed; notes each request's run id."""

    def __init__(self) -> None:
        self.run_ids: list[str] = []
        self.release = threading.Event()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                endpoint.run_ids.append(self.headers.get("Tickwork-Run-Id", ""))
                if self.path == "/silent":
                    endpoint.release.wait(30)
                    return
                self.send_response(int(self.path.strip("/")))
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


class HttpHarness:
    kind = TargetKind.HTTP
    rejecting_rules: Mapping[str, Any] | None = {"status_codes": [201]}
    _PATHS = {Case.SUCCEED: "/200", Case.TRANSIENT: "/503", Case.FINAL: "/404", Case.SILENT: "/silent",
              Case.UNKNOWN_SECRET: "/200"}

    def __init__(self, services: Services, endpoint: HttpEndpoint) -> None:
        self.endpoint = endpoint
        # The deployment sends to the endpoint's port only: a run to another is refused.
        settings = replace(services.settings, target_ports=(endpoint.port,))
        means = kinds.Means(settings, TenantSecrets(services), lambda run: None, Connections(), aws_access(settings))
        self.target = kinds.KINDS[TargetKind.HTTP](means)
        with services.db.connection() as conn:
            self.tenant_id = create_tenant(conn, f"contract-{uuid.uuid4().hex[:8]}")

    def run(self, case: Case, *, started_ago: float = 0.0, success: Mapping[str, Any] | None = None
            ) -> StartedExecution:
        port = self.endpoint.port + 1 if case is Case.REFUSED else self.endpoint.port
        headers = {"Authorization": "Bearer ${secrets.MISSING}"} if case is Case.UNKNOWN_SECRET else {}
        request = {"method": "POST", "url": f"http://127.0.0.1:{port}{self._PATHS.get(case, '/200')}",
                   "headers": headers, "body": "{}", "timeout_seconds": TIMEOUT_SECONDS}
        now = datetime.now(timezone.utc)
        return StartedExecution(str(uuid.uuid4()), str(uuid.uuid4()), self.tenant_id, now, 1, request, {},
                                attempt_started_at=now - timedelta(seconds=started_ago),
                                success=dict(success) if success else None)

    def called(self) -> list[str]:
        return list(self.endpoint.run_ids)


def _http(services: Services, request: pytest.FixtureRequest) -> Iterator[Harness]:
    endpoint = HttpEndpoint()
    yield HttpHarness(services, endpoint)
    endpoint.close()


def _aws(kind: TargetKind) -> Callable[[Services, pytest.FixtureRequest], Iterator[Harness]]:
    def made(services: Services, request: pytest.FixtureRequest) -> Iterator[Harness]:
        yield from aws_harnesses.harness(kind, TIMEOUT_SECONDS)(services, request.getfixturevalue("moto_endpoint"))
    return made


HARNESSES: dict[TargetKind, Callable[[Services, pytest.FixtureRequest], Iterator[Harness]]] = {
    TargetKind.HTTP: _http, **{kind: _aws(kind) for kind in aws_harnesses.RESOURCES}}


def test_every_kind_has_a_harness() -> None:
    assert set(HARNESSES) == set(kinds.KINDS)


@pytest.fixture(params=sorted(kinds.KINDS))
def harness(request: pytest.FixtureRequest, services: Services) -> Iterator[Harness]:
    yield from HARNESSES[request.param](services, request)


def attempt(harness: Harness, run: StartedExecution) -> Outcome:
    """Prepare, fire and complete, as the executor does."""
    prepared = harness.target.prepare(run)
    prepared.fire()
    return prepared.complete()


def test_its_runs_are_of_its_kind(harness: Harness) -> None:
    assert harness.target.kind == harness.kind
    assert kind_of(harness.run(Case.SUCCEED)) == harness.kind


def test_prepared_ahead_nothing_is_called_until_it_fires(harness: Harness) -> None:
    run = harness.run(Case.SUCCEED)
    prepared = harness.target.prepare(run)
    lead = prepared.warm_lead()
    assert lead is None or lead >= 0
    prepared.warm(0.0)  # the last step ahead, if it has one: still no call
    time.sleep(QUIET_SECONDS)
    assert harness.called() == []
    prepared.fire()
    outcome = prepared.complete()
    assert outcome.succeeded and outcome.failure is None and not outcome.retryable and outcome.error is None
    assert harness.called() == [run.id]


def test_an_abandoned_attempt_is_never_called(harness: Harness) -> None:
    harness.target.prepare(harness.run(Case.SUCCEED)).abandon()
    time.sleep(QUIET_SECONDS)
    assert harness.called() == []


def test_a_run_whose_time_ran_out_before_it_fired_times_out_uncalled(harness: Harness) -> None:
    """Prepared under its deadline: an attempt that started longer ago than its time is never called."""
    outcome = attempt(harness, harness.run(Case.SUCCEED, started_ago=TIMEOUT_SECONDS + 1))
    assert outcome.failure is FailureKind.TIMEOUT and outcome.retryable
    time.sleep(QUIET_SECONDS)
    assert harness.called() == []


@pytest.mark.parametrize("case", [Case.TRANSIENT, Case.FINAL])
def test_a_failing_answer_is_classified(harness: Harness, case: Case) -> None:
    run = harness.run(case)
    outcome = attempt(harness, run)
    assert not outcome.succeeded and outcome.failure is FAILURES[case]
    assert outcome.retryable is (case is Case.TRANSIENT) and outcome.error
    assert harness.called() == [run.id]


@pytest.mark.parametrize("case", [Case.REFUSED, Case.UNKNOWN_SECRET])
def test_a_run_the_deployment_refuses_is_not_called_nor_retried(harness: Harness, case: Case) -> None:
    outcome = attempt(harness, harness.run(case))
    assert outcome.failure is FAILURES[case] and not outcome.retryable
    assert outcome.error and "127.0.0.1" not in outcome.error  # what history keeps never quotes the target
    time.sleep(QUIET_SECONDS)
    assert harness.called() == []


@pytest.mark.realtime  # asserts how long the attempt took against the wall clock: one at a time in make test
def test_a_target_that_does_not_answer_times_out_within_the_runs_time(harness: Harness) -> None:
    run = harness.run(Case.SILENT)
    began = time.monotonic()
    outcome = attempt(harness, run)
    took = time.monotonic() - began
    assert outcome.failure is FailureKind.TIMEOUT and outcome.retryable
    assert TIMEOUT_SECONDS * 0.9 <= took < TIMEOUT_SECONDS + 2, took
    assert wait_for(lambda: harness.called() == [run.id], SEEN_WITHIN_SECONDS)


def test_judging_applies_the_jobs_success_rules_only(harness: Harness) -> None:
    plain = harness.run(Case.SUCCEED)
    outcome = attempt(harness, plain)
    assert harness.target.judge(plain, outcome) == outcome
    failed = attempt(harness, harness.run(Case.TRANSIENT))
    assert harness.target.judge(plain, failed) == failed
    if harness.rejecting_rules is None:
        return
    ruled = harness.run(Case.SUCCEED, success=harness.rejecting_rules)
    judged = harness.target.judge(ruled, attempt(harness, ruled))
    assert judged.failure is FailureKind.SUCCESS_RULE and judged.retryable and judged.error
