"""The adaptive lookahead in a real tick: a heavy instant is claimed seconds ahead, a light one is not."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

from tests.conftest import RecordingInvoker
from tests.integration.helpers import due_index, insert_job
from tests.support import mark_built, score_of
from tickwork.dispatch.poller import Poller
from tickwork.timeutil import to_ms
from tickwork.wiring import Services, build_services

T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)
INSTANT = T0 + timedelta(seconds=4)
HOURLY = "4 0 * * * *"  # 12:00:04, then hourly


def _quick(services: Services, invoker: RecordingInvoker) -> Services:
    # Executors that ready 100 runs a second: 300 runs at one instant get a lead of 1.5 + 3 s.
    return build_services(replace(services.settings, prepare_runs_per_second=100), invoker=invoker)


def test_a_heavy_instant_is_claimed_as_far_ahead_as_its_runs_need(services: Services, invoker: RecordingInvoker) -> None:
    job_ids = {insert_job(services, schedule=HOURLY, next_run_at=INSTANT) for _ in range(300)}
    mark_built(due_index(services), to_ms(T0))
    quick = _quick(services, invoker)
    poller = Poller(quick)
    try:
        early = poller.tick(to_ms(T0) + 500)  # 3.5 s ahead: outside the 1.5 s base, inside the 4.5 s lead
    finally:
        quick.close()
    assert early.dispatched == 300
    assert {d.fire_at_ms for d in invoker.dispatches} == {to_ms(INSTANT)}
    assert all(score_of(due_index(services), f"j:{j}") == to_ms(INSTANT + timedelta(hours=1)) for j in job_ids)


def test_a_light_instant_waits_for_the_base_lookahead(services: Services, invoker: RecordingInvoker) -> None:
    for _ in range(100):  # a lead of 1.5 + 1 s
        insert_job(services, schedule=HOURLY, next_run_at=INSTANT)
    mark_built(due_index(services), to_ms(T0))
    quick = _quick(services, invoker)
    poller = Poller(quick)
    try:
        assert poller.tick(to_ms(T0) + 500).dispatched == 0
        assert poller.tick(to_ms(T0) + 1500).dispatched == 100  # 2.5 s ahead: inside its lead
    finally:
        quick.close()
