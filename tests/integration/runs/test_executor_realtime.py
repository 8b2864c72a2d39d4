"""The executor on the wall clock, where real time is the subject: its real sleep never sends early, and
Postgres (whose clock stamps the run) agrees with it. The exact instants are pinned in test_executor.py;
how soon after its instant a run leaves is measured by the benchmarks, so the bounds here are loose
enough for a loaded machine."""
from __future__ import annotations

import time
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from tests.conftest import Target
from tests.integration.helpers import insert_job
from tickwork.dispatch.poller import Poller
from tickwork.models import Dispatch
from tickwork.runs.executor import Executor, http_client
from tickwork.wiring import Services

pytestmark = pytest.mark.realtime

# Late by more than this is a stalled machine, not a slow send (the benchmarks measure milliseconds).
LATE_SECONDS = 1.0
# Ahead of its instant, a run gets ready (20 connections at most here): ample on a loaded machine.
READY_SECONDS = 2.0


def _claimed_soon(services: Services, target: Target, count: int, ahead: timedelta) -> list[Dispatch]:
    """`count` jobs due `ahead` from now, claimed by a tick now (up to its lookahead early)."""
    due = datetime.now(timezone.utc) + ahead
    for i in range(count):
        insert_job(services, schedule="0 0 1 1 *", next_run_at=due, url=f"{target.url}/run{i}")
    Poller(services).tick(int(time.time() * 1000))
    return list(services.invoker.dispatches)  # type: ignore[union-attr]


def test_a_run_is_sent_at_its_instant_never_before(services: Services, target: Target) -> None:
    (claimed,) = _claimed_soon(services, target, 1, timedelta(0))
    fire_at = time.time() + READY_SECONDS
    Executor(services, http_client()).run([replace(claimed, fire_at_ms=int(fire_at * 1000))])
    assert 0 <= target.requests[0]["at"] - int(fire_at * 1000) / 1000 < LATE_SECONDS


def test_a_group_is_sent_at_its_instant_never_before(services: Services, target: Target) -> None:
    claimed = _claimed_soon(services, target, 20, timedelta(0))
    fire_at_ms = int((time.time() + READY_SECONDS) * 1000)
    group = [replace(d, fire_at_ms=fire_at_ms) for d in claimed]
    assert Executor(services, http_client()).run(group) == ["succeeded"] * 20
    arrivals = sorted(r["at"] - fire_at_ms / 1000 for r in target.requests)
    assert len(arrivals) == 20 and 0 <= arrivals[0] and arrivals[-1] < LATE_SECONDS, arrivals


def test_a_run_started_ahead_of_its_instant_records_the_instant(services: Services, target: Target) -> None:
    (dispatch,) = _claimed_soon(services, target, 1, timedelta(seconds=1))
    Executor(services, http_client()).run([dispatch])
    with services.db.connection() as conn:
        started, scheduled = conn.execute(
            "SELECT started_at, scheduled_for FROM executions WHERE id = %s", (dispatch.execution_id,)).fetchone()
    assert started >= scheduled
    assert target.requests[0]["at"] >= scheduled.timestamp()
