"""A pause or delete stops a run already handed to its executor ahead of its instant (issue 33, item 5), on
an injected clock, against real Postgres, Redis and an HTTP target: the poller hands the slot over 10.5 s
ahead (as the adaptive lookahead does for a heavy instant), the executor starts it and waits, and the job
is paused (or deleted) at a grid of offsets before the instant, from the executor's own clock."""
from __future__ import annotations

import threading
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

import pytest

from tests.integration.helpers import attempts, executor_at, insert_job
from tests.support import FakeClock
from tickwork.dispatch.poller import Poller
from tickwork.models import Dispatch
from tickwork.scope import Scope
from tickwork.tenant import jobs
from tickwork.timeutil import to_ms
from tickwork.wiring import Services

T = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)
DAILY = "0 0 12 * * *"  # one slot, at T
HANDED_OVER_AHEAD_MS = 10_500  # the adaptive lookahead's longest lead (10 s), from a tick half a second before
OFFSETS = (0.06, 0.26, 0.46, 1.46, 2.5, 5.0, 9.96)  # seconds before T at which the job is paused
PAUSED_NOTE = "skipped: the job was paused before its instant"


class TimelineClock(FakeClock):
    """A FakeClock that runs `at(when, action)` actions as a sleep crosses their time, on the sleeper's
    thread, with the clock at that time: what another client does while the executor waits."""

    def __init__(self, at: datetime) -> None:
        super().__init__(at)
        self.actions: list[tuple[datetime, Callable[[datetime], None]]] = []
        self._timeline = threading.Lock()

    def at_time(self, when: datetime, action: Callable[[datetime], None]) -> None:
        self.actions.append((when, action))

    def sleep(self, seconds: float) -> None:
        with self._timeline:
            end = datetime.fromtimestamp(self.time() + seconds, tz=timezone.utc)
            for when, action in sorted((a for a in self.actions if a[0] <= end), key=lambda a: a[0]):
                self.actions.remove((when, action))
                if when > self.at:
                    super().sleep((when - self.at).total_seconds())
                action(when)
            super().sleep(max(0.0, (end - self.at).total_seconds()))


def scope(svc: Services, tenant_id: str, now: datetime) -> Scope:
    return Scope(svc.db, svc.index, svc.settings, tenant_id, now, svc.keyring)


def tenant_of(svc: Services, job_id: str) -> str:
    with svc.db.connection() as conn:
        return conn.execute("SELECT tenant_id::text FROM jobs WHERE id = %s", (job_id,)).fetchone()[0]


def handed_over(svc: Services, invoker: Any, job_ids: list[str]) -> list[Dispatch]:
    """The poller's tick that hands the slots at T over 10.5 s ahead; their dispatches, in `job_ids` order."""
    ahead = replace(svc, settings=replace(svc.settings, lookahead_ms=HANDED_OVER_AHEAD_MS))
    Poller(ahead).tick(to_ms(T) - HANDED_OVER_AHEAD_MS)
    with svc.db.connection() as conn:
        runs = dict(conn.execute("SELECT job_id::text, id::text FROM executions").fetchall())
    by_run = {d.execution_id: d for d in invoker.dispatches}
    return [by_run[runs[job_id]] for job_id in job_ids]


def run_row(svc: Services, execution_id: str) -> tuple[Any, ...]:
    with svc.db.connection() as conn:
        return conn.execute("SELECT status, last_error, attempt_count, started_at FROM executions WHERE id = %s",
                            (execution_id,)).fetchone()


def jobs_to(svc: Services, target: Any, count: int) -> list[str]:
    return [insert_job(svc, schedule=DAILY, next_run_at=T, url=f"{target.url}/job-{i}") for i in range(count)]


@pytest.mark.parametrize("offset", OFFSETS)
def test_a_job_paused_before_its_instant_does_not_send_the_run_handed_over_ahead(
    services: Services, invoker: Any, target: Any, offset: float,
) -> None:
    """Two jobs' runs share an invocation; one job is paused `offset` s before T, after its run was started:
    that run is not sent and ends skipped with the reason; the other goes out at T."""
    paused, kept = jobs_to(services, target, 2)
    dispatches = handed_over(services, invoker, [paused, kept])
    clock = TimelineClock(T - timedelta(milliseconds=HANDED_OVER_AHEAD_MS - 100))
    clock.at_time(T - timedelta(seconds=offset),
                  lambda now: jobs.pause_job(scope(services, tenant_of(services, paused), now), paused))

    outcomes = executor_at(services, clock).run(dispatches)

    assert outcomes == ["skipped", "succeeded"]
    assert [r["path"] for r in target.requests] == ["/job-1"]
    status, note, attempt_count, started_at = run_row(services, dispatches[0].execution_id)
    assert (status, note, attempt_count, started_at) == ("skipped", PAUSED_NOTE, 0, None)
    assert attempts(services, dispatches[0].execution_id) == []
    assert services.redis.zcard(services.in_flight.key(dispatches[0].tenant_id)) == 0


@pytest.mark.parametrize("offset", (0.06, 1.46, 9.96))
def test_a_lone_run_of_a_job_deleted_before_its_instant_is_not_sent(
    services: Services, invoker: Any, target: Any, offset: float,
) -> None:
    """An invocation of one run (no Sender): deleted `offset` s before T, the run ends skipped, unsent."""
    (job_id,) = jobs_to(services, target, 1)
    (dispatch,) = handed_over(services, invoker, [job_id])
    clock = TimelineClock(T - timedelta(milliseconds=HANDED_OVER_AHEAD_MS - 100))
    clock.at_time(T - timedelta(seconds=offset),
                  lambda now: jobs.delete_job(scope(services, tenant_of(services, job_id), now), job_id))

    assert executor_at(services, clock).run([dispatch]) == ["skipped"]
    assert target.requests == []
    assert run_row(services, dispatch.execution_id)[:3] == (
        "skipped", "skipped: the job was deleted before its instant", 0)


def test_a_job_paused_after_the_write_has_its_run_sent(services: Services, invoker: Any, target: Any) -> None:
    (job_id,) = jobs_to(services, target, 1)
    (dispatch,) = handed_over(services, invoker, [job_id])
    clock = TimelineClock(T - timedelta(seconds=5))
    assert executor_at(services, clock).run([dispatch]) == ["succeeded"]
    jobs.pause_job(scope(services, tenant_of(services, job_id), T + timedelta(milliseconds=1)), job_id)
    assert len(target.requests) == 1
    assert run_row(services, dispatch.execution_id)[:3] == ("succeeded", None, 1)


def test_a_job_paused_then_resumed_before_the_instant_has_its_run_sent(
    services: Services, invoker: Any, target: Any,
) -> None:
    (job_id,) = jobs_to(services, target, 1)
    (dispatch,) = handed_over(services, invoker, [job_id])
    tenant_id = tenant_of(services, job_id)
    clock = TimelineClock(T - timedelta(seconds=10))
    clock.at_time(T - timedelta(seconds=3), lambda now: jobs.pause_job(scope(services, tenant_id, now), job_id))
    clock.at_time(T - timedelta(seconds=1), lambda now: jobs.resume_job(scope(services, tenant_id, now), job_id))
    assert executor_at(services, clock).run([dispatch]) == ["succeeded"]
    assert len(target.requests) == 1


def test_a_manual_run_of_a_paused_job_goes_ahead(services: Services, invoker: Any, target: Any) -> None:
    """The documented exception: the job's marker holds the run back at its instant, Postgres says a manual run
    goes ahead paused or not, and it is sent."""
    (job_id,) = jobs_to(services, target, 1)
    tenant_id = tenant_of(services, job_id)
    jobs.pause_job(scope(services, tenant_id, T - timedelta(seconds=2)), job_id)
    manual = jobs.run_job(scope(services, tenant_id, T), job_id)
    Poller(services).tick(to_ms(T) - 1000)
    (dispatch,) = invoker.dispatches
    assert dispatch.execution_id == manual.id and services.index.stopped_jobs([job_id]) == {job_id: "paused"}
    clock = TimelineClock(T - timedelta(seconds=1))
    assert executor_at(services, clock).run([dispatch]) == ["succeeded"]
    assert len(target.requests) == 1


def test_a_retry_started_ahead_of_a_pause_is_dropped_and_keeps_its_attempts(
    services: Services, target: Any,
) -> None:
    (job_id,) = jobs_to(services, target, 1)
    tenant_id, run_id = tenant_of(services, job_id), "44444444-4444-4444-4444-444444444444"
    with services.db.connection() as conn:
        conn.execute("INSERT INTO executions (id, tenant_id, job_id, scheduled_for, trigger, status, attempt_count,"
                     " started_at, next_attempt_at) VALUES (%s, %s, %s, %s, 'schedule', 'retrying', 1, %s, %s)",
                     (run_id, tenant_id, job_id, T - timedelta(seconds=30), T - timedelta(seconds=30), T))
    clock = TimelineClock(T - timedelta(seconds=2))
    clock.at_time(T - timedelta(seconds=1), lambda now: jobs.pause_job(scope(services, tenant_id, now), job_id))
    assert executor_at(services, clock).run([Dispatch(run_id, 2, to_ms(T), tenant_id=tenant_id)]) == ["skipped"]
    assert target.requests == []
    status, note, attempt_count, started_at = run_row(services, run_id)
    assert (status, note, attempt_count, started_at) == ("skipped", PAUSED_NOTE, 1, T - timedelta(seconds=30))


def test_a_pause_whose_marker_redis_lost_lets_the_run_go_out(services: Services, invoker: Any, target: Any) -> None:
    """What docs/api.md says: the marker is a hint in Redis; lost (a failover), the run handed over goes out."""
    (job_id,) = jobs_to(services, target, 1)
    (dispatch,) = handed_over(services, invoker, [job_id])
    tenant_id = tenant_of(services, job_id)

    def paused_then_lost(now: datetime) -> None:
        jobs.pause_job(scope(services, tenant_id, now), job_id)
        services.redis.delete(services.index.stopped_key(job_id))

    clock = TimelineClock(T - timedelta(seconds=5))
    clock.at_time(T - timedelta(seconds=1), paused_then_lost)
    assert executor_at(services, clock).run([dispatch]) == ["succeeded"]
    assert len(target.requests) == 1


def test_the_executor_reads_the_markers_once_per_instant_of_a_group(
    services: Services, invoker: Any, target: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The check costs one Redis round trip per instant of an invocation, not one per run."""
    job_ids = jobs_to(services, target, 5)
    dispatches = handed_over(services, invoker, job_ids)
    reads: list[list[str]] = []
    real = services.index.stopped_jobs
    monkeypatch.setattr(services.index, "stopped_jobs", lambda ids: reads.append(list(ids)) or real(ids))
    assert executor_at(services, FakeClock(T - timedelta(seconds=1))).run(dispatches) == ["succeeded"] * 5
    assert len(reads) == 1 and sorted(reads[0]) == sorted(job_ids)
