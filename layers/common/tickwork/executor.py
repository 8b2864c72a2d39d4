"""Runs dispatched attempts: win the execution, wait for its instant, send, record, schedule a retry."""
from __future__ import annotations

import functools
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Sequence

import urllib3
from aws_lambda_powertools import Logger

from tickwork import delivery, metrics, retry
from tickwork.dueindex import DueIndex
from tickwork.errors import UnsafeTargetError
from tickwork.models import Dispatch, StartedExecution
from tickwork.store import executions as store
from tickwork.targets import resolve_public_addresses
from tickwork.timeutil import rfc3339, to_ms
from tickwork.wiring import Services

logger = Logger(child=True)

# The poller claims runs up to its lookahead early; anything further out is a clock problem, not a wait.
MAX_EARLY_WAIT_SECONDS = 5.0
# Runs grouped in one invocation (a burst) are sent concurrently, within this many threads.
MAX_PARALLEL_SENDS = 50


@functools.lru_cache(maxsize=1)
def http_client() -> urllib3.PoolManager:
    """One pool per execution environment, kept warm across invocations; as many connections per
    target as a grouped invocation sends at once, so a burst to one host reuses them."""
    return urllib3.PoolManager(num_pools=64, maxsize=MAX_PARALLEL_SENDS)


@dataclass
class Executor:
    svc: Services
    http: urllib3.PoolManager
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    index: DueIndex = field(init=False)
    # Set while a group runs: results are written by one thread, so the group's sends, which wait for
    # their instant together, get the CPU first instead of queueing behind the earlier runs' writes.
    _writer: ThreadPoolExecutor | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.index = DueIndex(self.svc.redis, self.svc.settings.namespace)

    def run(self, dispatches: Sequence[Dispatch]) -> list[str]:
        """Run every dispatch of one invocation; returns each one's outcome (status or 'duplicate')."""
        if len(dispatches) <= 1:
            return [self.run_one(d) for d in dispatches]
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="recorder")
        try:
            with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_SENDS, len(dispatches))) as pool:
                return list(pool.map(self.run_one, dispatches))
        finally:
            self._writer.shutdown()
            self._writer = None

    def run_one(self, dispatch: Dispatch) -> str:
        # The common case (overlap allowed, or a retry) starts before the wait, so the request leaves
        # at its instant with no database work in between. A job that forbids overlap is judged after
        # the wait, against the previous run as it is at this run's instant.
        with self.svc.db.connection() as conn:
            started: StartedExecution | str | None = store.start_unguarded(conn, dispatch.execution_id,
                                                                            dispatch.attempt)
        self._wait_until(dispatch.fire_at_ms)
        if started is None:
            with self.svc.db.connection() as conn:
                started = store.start_guarded(conn, dispatch.execution_id, dispatch.attempt)
        if isinstance(started, str):
            logger.info("run not started", extra={"execution_id": dispatch.execution_id,
                                                  "attempt": dispatch.attempt, "reason": started})
            metrics.record_not_started(started)
            return started
        return self._attempt(started)

    def _wait_until(self, fire_at_ms: int) -> None:
        early = fire_at_ms / 1000 - self.clock()
        if 0 < early <= MAX_EARLY_WAIT_SECONDS:
            self.sleep(early)

    def _attempt(self, run: StartedExecution) -> str:
        started_at = datetime.fromtimestamp(self.clock(), tz=timezone.utc)
        outcome = self._send(run)
        if self._writer is None:
            return self._record(run, started_at, outcome)
        return self._writer.submit(self._record, run, started_at, outcome).result()

    def _record(self, run: StartedExecution, started_at: datetime, outcome: delivery.Outcome) -> str:
        now = datetime.fromtimestamp(self.clock(), tz=timezone.utc)
        policy = retry.RetryPolicy.from_dict(run.retry)
        decision = retry.decide(policy, run.attempt, outcome.succeeded, outcome.retryable, now,
                                outcome.retry_after_seconds)
        record = store.AttemptRecord(run.attempt, started_at, outcome.duration_ms, outcome.status_code,
                                     outcome.body, outcome.error)
        with self.svc.db.connection() as conn:
            kept, released = store.finish_attempt(conn, run.id, record, decision.status, decision.next_attempt_at,
                                                  may_release=run.overlap != "allow")
        if kept and decision.next_attempt_at is not None:
            self.index.schedule_execution(run.id, run.attempt + 1, to_ms(decision.next_attempt_at))
        if released is not None:
            self.index.schedule_execution(released, 1, int(self.clock() * 1000))
        lag_ms = to_ms(started_at) - to_ms(run.scheduled_for)
        logger.info("attempt finished", extra={
            "execution_id": run.id, "job_id": run.job_id, "attempt": run.attempt, "status": decision.status,
            "status_code": outcome.status_code, "duration_ms": outcome.duration_ms, "error": outcome.error,
            "lag_ms": lag_ms,
        })
        metrics.record_attempt(decision.status, lag_ms if run.attempt == 1 else 0, outcome.duration_ms)
        return decision.status if kept else "superseded"

    def _send(self, run: StartedExecution) -> delivery.Outcome:
        request = run.request
        timeout = delivery.request_timeout_seconds(request, self.svc.settings.max_request_timeout_seconds)
        if self.svc.settings.allow_private_targets:
            return delivery.send(self.http, request, run_headers(run), timeout)
        host, port = delivery.host_and_port(request["url"])
        try:
            addresses = resolve_public_addresses(host, port, allow_private=False)
        except UnsafeTargetError as exc:
            return delivery.Outcome(None, None, f"refused: {exc.message}", 0)
        except OSError:
            return delivery.Outcome(None, None, "connection failed: could not resolve host", 0)
        # Connect to the address just checked, so a second DNS answer cannot point inside the network.
        return delivery.send(self.http, request, run_headers(run), timeout, pinned_address=addresses[0])


def run_headers(run: StartedExecution) -> dict[str, str]:
    """Headers that identify the run: the run id is stable across retries so targets can dedupe."""
    return {
        "Tickwork-Run-Id": run.id,
        "Tickwork-Job-Id": run.job_id,
        "Tickwork-Attempt": str(run.attempt),
        "Tickwork-Scheduled-For": rfc3339(run.scheduled_for) or "",
    }


def handle_event(svc: Services, dispatches: Sequence[Dispatch]) -> dict[str, Any]:
    try:
        return {"outcomes": Executor(svc, http_client()).run(dispatches)}
    finally:
        metrics.flush()
