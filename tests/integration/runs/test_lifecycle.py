"""Pause and delete stop a job's runs at once: no retry of a paused or deleted job starts or is queued, a
run whose attempt is in flight finishes that attempt only. Manual runs are outside the schedule: a paused
job's manual run goes ahead, retries included (docs/api.md). Real Postgres, Redis and HTTP target."""
from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

import pytest

from tests.conftest import Target
from tests.integration.helpers import attempts, due_index, executor_at, insert_job
from tests.support import FakeClock, score_of, wait_for
from tickwork.dispatch.poller import Poller
from tickwork.models import Dispatch
from tickwork.scope import Scope
from tickwork.tenant import jobs
from tickwork.timeutil import to_ms
from tickwork.wiring import Services

T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)
RETRY = {"strategy": "fixed", "max_attempts": 3, "delay_seconds": 30}


def _scope(services: Services, job_id: str, now: datetime) -> Scope:
    with services.db.connection() as conn:
        tenant_id = conn.execute("SELECT tenant_id::text FROM jobs WHERE id = %s", (job_id,)).fetchone()[0]
    return Scope(services.db, due_index(services), services.settings, tenant_id, now, services.keyring)


STOPS: dict[str, Callable[[Scope, str], Any]] = {"paused": jobs.pause_job, "deleted": jobs.delete_job}


def _dispatches(services: Services, at: datetime) -> list[Dispatch]:
    """What a poller tick at `at` hands over."""
    services.invoker.dispatches.clear()  # type: ignore[union-attr]
    Poller(services).tick(to_ms(at))
    return list(services.invoker.dispatches)  # type: ignore[union-attr]


def _dispatched(services: Services, at: datetime) -> Dispatch:
    (dispatch,) = _dispatches(services, at)
    return dispatch


def _run(services: Services, dispatch: Dispatch) -> list[str]:
    return executor_at(services, FakeClock(datetime.fromtimestamp(dispatch.fire_at_ms / 1000, timezone.utc))).run(
        [dispatch])


def _row(services: Services, execution_id: str) -> tuple[Any, ...]:
    with services.db.connection() as conn:
        return conn.execute("SELECT status, attempt_count, next_attempt_at, last_error FROM executions WHERE id = %s",
                            (execution_id,)).fetchone()


def _retrying_run(services: Services, target: Target, **job: Any) -> tuple[str, Dispatch]:
    """A scheduled run whose first attempt failed and whose second is queued for T0 + 30 s."""
    job_id = insert_job(services, schedule="0 0 1 1 *", next_run_at=T0, url=target.url + "/hook", **job)
    first = _dispatched(services, T0)
    target.statuses = [503]
    assert _run(services, first) == ["retrying"]
    return job_id, first


@pytest.mark.parametrize("stop", sorted(STOPS))
def test_a_retry_queued_before_the_job_stopped_does_not_start(services: Services, target: Target, stop: str) -> None:
    """Break: pausing cancelled nothing, so the retry queued in the due index started at its time and
    sent the request of a paused job. Must hold: it does not start; the run ends skipped, saying why."""
    job_id, first = _retrying_run(services, target, retry=RETRY)
    STOPS[stop](_scope(services, job_id, T0 + timedelta(seconds=5)), job_id)

    retry = Dispatch(first.execution_id, 2, to_ms(T0 + timedelta(seconds=30)))
    assert _run(services, retry) == ["duplicate"]  # not started: the run is over, as a late delivery finds it
    assert len(target.requests) == 1
    status, attempt_count, next_attempt_at, error = _row(services, first.execution_id)
    assert (status, attempt_count, next_attempt_at, error) == ("skipped", 1, None, f"skipped: the job was {stop}")


@pytest.mark.parametrize("past_next_run", [False, True])
@pytest.mark.parametrize("stop", sorted(STOPS))
def test_an_attempt_in_flight_when_the_job_stops_finishes_and_is_not_retried(
    services: Services, target: Target, stop: str, past_next_run: bool,
) -> None:
    """Break: a paused or deleted job has no next slot, and "no next slot" let the retry through (the
    default `past_next_run: false` as much as `true`). Must hold: the attempt in flight is recorded, the
    run ends failed with the reason, and no retry is queued."""
    job_id = insert_job(services, schedule="0 0 1 1 *", next_run_at=T0, url=target.url + "/hook",
                        retry={**RETRY, "past_next_run": past_next_run})
    dispatch = _dispatched(services, T0)
    gate = target.gates["/hook"] = threading.Event()
    target.statuses = [503]
    outcome: list[str] = []
    running = threading.Thread(target=lambda: outcome.extend(_run(services, dispatch)))
    running.start()
    try:
        assert wait_for(lambda: len(target.requests) == 1)
        STOPS[stop](_scope(services, job_id, T0 + timedelta(milliseconds=200)), job_id)
    finally:
        gate.set()
        running.join()

    assert outcome == ["failed"]
    assert _row(services, dispatch.execution_id)[:3] == ("failed", 1, None)
    (attempt,) = attempts(services, dispatch.execution_id)
    assert attempt[3:] == (503, f"HTTP 503; not retried: the job was {stop}")
    assert score_of(due_index(services), f"e:{dispatch.execution_id}:2") is None


def test_a_retry_of_a_job_paused_by_its_failures_does_not_start(services: Services, target: Target) -> None:
    """Break: a job that `pause_after_failures` paused while another of its runs waited for a retry
    (overlap allow) sent that retry anyway. Must hold: the pause skips the run at once, saying why, and
    its retry does not start."""
    # Two slots, at T0 and a second later: one tick claims both.
    job_id = insert_job(services, schedule="0-1 0 12 30 11 *", next_run_at=T0, url=target.url + "/hook", retry=RETRY)
    with services.db.connection() as conn:
        conn.execute("UPDATE jobs SET pause_after_failures = 1 WHERE id = %s", (job_id,))
    retrying, failing = sorted(_dispatches(services, T0), key=lambda d: d.fire_at_ms)
    target.statuses = [503, 404]
    assert _run(services, retrying) == ["retrying"]
    assert _run(services, failing) == ["failed"]
    with services.db.connection() as conn:
        assert conn.execute("SELECT status FROM jobs WHERE id = %s", (job_id,)).fetchone()[0] == "paused"
    assert _row(services, retrying.execution_id)[0::3] == ("skipped", "skipped: the job was paused")

    retry = Dispatch(retrying.execution_id, 2, to_ms(T0 + timedelta(seconds=30)))
    assert _run(services, retry) == ["duplicate"]
    assert len(target.requests) == 2


@pytest.mark.parametrize("stop", sorted(STOPS))
def test_a_retry_queued_as_the_job_stopped_does_not_start(services: Services, target: Target, stop: str) -> None:
    """Break: the start of a retry did not look at its job. A pause or delete that commits after the
    executor read the job for its retry decision, and before it recorded the retry, leaves the run
    `retrying` under a stopped job (set here in SQL: the race itself cannot be timed in a test). Must
    hold: the retry does not start; its start skips the run, saying why."""
    job_id, first = _retrying_run(services, target, retry=RETRY)
    with services.db.connection() as conn:
        conn.execute("UPDATE jobs SET status = %s, next_run_at = NULL WHERE id = %s", (stop, job_id))

    retry = Dispatch(first.execution_id, 2, to_ms(T0 + timedelta(seconds=30)))
    assert _run(services, retry) == ["duplicate"]
    assert len(target.requests) == 1
    status, attempt_count, next_attempt_at, error = _row(services, first.execution_id)
    assert (status, attempt_count, next_attempt_at, error) == ("skipped", 1, None, f"skipped: the job was {stop}")


def test_a_manual_run_of_a_paused_job_runs_and_retries(services: Services, target: Target) -> None:
    """A paused job can be run by hand (docs/api.md): its manual run is not stopped by the pause,
    retries included."""
    job_id = insert_job(services, schedule="0 0 1 1 *", next_run_at=T0, url=target.url + "/hook", retry=RETRY)
    jobs.pause_job(_scope(services, job_id, T0 - timedelta(seconds=5)), job_id)
    manual = jobs.run_job(_scope(services, job_id, T0), job_id)
    target.statuses = [503]
    first = _dispatched(services, T0)
    assert first.execution_id == manual.id and _run(services, first) == ["retrying"]
    assert _run(services, _dispatched(services, T0 + timedelta(seconds=30))) == ["succeeded"]
    assert len(target.requests) == 2
