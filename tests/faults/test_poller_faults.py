"""Faults inside a poller tick: a crash between its steps, and a poller frozen past its lock's TTL."""
from __future__ import annotations

import itertools
import threading
from dataclasses import replace
from datetime import timedelta
from types import SimpleNamespace
from typing import Any, Callable, Iterator

import pytest

from tests.conftest import RecordingInvoker, Target
from tests.faults.support import (
    HOURLY,
    Crash,
    assert_no_double_run,
    crash,
    execute,
    next_hour,
    next_slot_fires,
    slot_statuses,
)
from tests.integration.helpers import due_index, insert_job
from tests.support import mark_built, score_of, wait_for
from tickwork.dispatch.poller import Poller
from tickwork.ops.maintenance import run_maintenance
from tickwork.store import executions as executions_store
from tickwork.timeutil import to_ms
from tickwork.wiring import Services, build_services

S0 = next_hour()
HOUR = timedelta(hours=1)


def _hourly_job(svc: Services, target: Target) -> str:
    job_id = insert_job(svc, schedule=HOURLY, next_run_at=S0, url=target.url + "/hook")
    mark_built(due_index(svc), to_ms(S0))
    return job_id


def test_crash_after_the_redis_claim_before_the_insert(
    services: Services, invoker: RecordingInvoker, target: Target, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Break: the poller dies after its claim advanced the job's score, before the slot's row is inserted.
    Must hold: maintenance moves the score back to the unrecorded slot, the next tick runs it exactly once
    (it is inside the catch-up window), and the following slot fires."""
    job_id = _hourly_job(services, target)
    monkeypatch.setattr(executions_store, "record_claims", crash)
    with pytest.raises(Crash):
        Poller(services).tick(to_ms(S0))
    monkeypatch.undo()
    assert score_of(due_index(services), f"j:{job_id}") == to_ms(S0 + HOUR) and slot_statuses(services, job_id) == {}
    assert Poller(services).tick(to_ms(S0) + 1_000).dispatched == 0  # the index alone has moved on

    assert run_maintenance(services, S0 + timedelta(seconds=15)).rewound == 1
    assert Poller(services).tick(to_ms(S0) + 15_000).dispatched == 1
    execute(services, invoker.dispatches, S0 + timedelta(seconds=15))
    next_slot_fires(services, invoker, target, job_id, S0 + HOUR, {S0: "succeeded"})


def test_crash_after_the_claim_found_outside_the_catch_up_window_is_recorded_missed(
    services: Services, invoker: RecordingInvoker, target: Target, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Break: the same crash, but the job only tolerates runs 10 s late and maintenance finds it later.
    Must hold: the slot is recorded missed (not silently gone, not run late), the following slot fires."""
    job_id = _hourly_job(services, target)
    with services.db.connection() as conn:
        conn.execute("UPDATE jobs SET catchup_window_seconds = 10 WHERE id = %s", (job_id,))
    monkeypatch.setattr(executions_store, "record_claims", crash)
    with pytest.raises(Crash):
        Poller(services).tick(to_ms(S0))
    monkeypatch.undo()
    assert run_maintenance(services, S0 + timedelta(seconds=30)).rewound == 1
    assert Poller(services).tick(to_ms(S0) + 30_000).dispatched == 0
    next_slot_fires(services, invoker, target, job_id, S0 + HOUR, {S0: "missed"})


def test_crash_after_the_claim_of_a_job_faster_than_maintenance(
    services: Services, invoker: RecordingInvoker, target: Target, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Break: the same crash for a job due every second: its next slot is claimed long before maintenance.
    Must hold: the lost slot is still accounted for (recorded missed by the next claim), the next runs fire."""
    job_id = insert_job(services, schedule="* * * * * *", next_run_at=S0, url=target.url + "/hook")
    mark_built(due_index(services), to_ms(S0))
    monkeypatch.setattr(executions_store, "record_claims", crash)
    with pytest.raises(Crash):
        Poller(services).tick(to_ms(S0) - 1_000)
    monkeypatch.undo()
    Poller(services).tick(to_ms(S0))
    execute(services, invoker.dispatches, S0 + timedelta(seconds=1))
    assert slot_statuses(services, job_id) == {S0: "missed", S0 + timedelta(seconds=1): "succeeded"}
    assert run_maintenance(services, S0 + timedelta(seconds=2)).rewound == 0  # nothing left to restore
    assert Poller(services).tick(to_ms(S0) + 2_000).dispatched >= 1  # the next slots fire
    assert_no_double_run(invoker, target)


def test_crash_after_the_insert_before_the_invoke(
    services: Services, invoker: RecordingInvoker, target: Target, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Break: the poller dies after inserting the run, before handing it to an executor.
    Must hold: the sweeper re-dispatches the queued run once (however often it runs), the run happens
    exactly once, and the following slot fires."""
    job_id = _hourly_job(services, target)
    monkeypatch.setattr(invoker, "invoke", crash)
    with pytest.raises(Crash):
        Poller(services).tick(to_ms(S0))
    monkeypatch.undo()
    assert slot_statuses(services, job_id) == {S0: "queued"} and invoker.dispatches == []

    later = S0 + timedelta(seconds=70)
    assert run_maintenance(services, later).redispatched == 1
    assert run_maintenance(services, later + timedelta(seconds=1)).redispatched == 0
    assert Poller(services).tick(to_ms(later)).dispatched == 1
    execute(services, invoker.dispatches, later)
    next_slot_fires(services, invoker, target, job_id, S0 + HOUR, {S0: "succeeded"})


# ---------------------------------------------------------------- a frozen poller


class Gate:
    """Holds the thread it is called in until opened, and says when one arrived."""

    def __init__(self) -> None:
        self.arrived = threading.Event()
        self.opened = threading.Event()

    def wrap(self, fn: Callable[..., Any], only: Callable[[], bool] = lambda: True) -> Callable[..., Any]:
        def gated(*args: Any, **kwargs: Any) -> Any:
            if only():
                self.arrived.set()
                assert self.opened.wait(10), "gate never opened"
            return fn(*args, **kwargs)
        return gated


@pytest.fixture
def second_services(services: Services, invoker: RecordingInvoker) -> Iterator[Callable[[int], Services]]:
    """More pollers on the same database and namespace, each with its own clients and tick lock TTL."""
    built: list[Services] = []

    def build(tick_lock_ms: int) -> Services:
        built.append(build_services(replace(services.settings, tick_lock_ms=tick_lock_ms), invoker=invoker))
        return built[-1]

    yield build
    for svc in built:
        svc.close()


def _thread(fn: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """A thread (not started) that keeps fn's result."""
    out: list[Any] = []
    return threading.Thread(target=lambda: out.append(fn())), out


def test_a_poller_frozen_between_fetch_and_claim_past_its_lock_ttl(
    services: Services, invoker: RecordingInvoker, target: Target, second_services: Callable[[int], Services],
) -> None:
    """Break: poller A fetches the due job, then freezes past its 200 ms lock TTL; poller B takes the
    lock and, while B is still inside its tick, A resumes and finishes.
    Must hold: the slot is dispatched once (A's stale claim loses the compare-and-set), and A's unlock
    leaves B's lock in place."""
    job_id = _hourly_job(services, target)
    a = Poller(second_services(200))
    frozen, b_busy = Gate(), Gate()
    a.index.shards[0].claim = frozen.wrap(a.index.shards[0].claim)  # type: ignore[method-assign]
    b_svc = second_services(5_000)
    b_svc.invoker = SimpleNamespace(invoke=b_busy.wrap(invoker.invoke))  # type: ignore[assignment]

    thread_a, a_result = _thread(lambda: a.tick(to_ms(S0)))
    thread_a.start()
    assert frozen.arrived.wait(5)
    assert wait_for(lambda: not services.redis.exists(due_index(services).tick_lock_key))  # A's lock expires
    thread_b, b_result = _thread(lambda: Poller(b_svc).tick(to_ms(S0)))
    thread_b.start()
    assert b_busy.arrived.wait(5)  # B holds the lock, has recorded the slot, is dispatching it
    frozen.opened.set()
    thread_a.join(5)
    lock_key = due_index(services).tick_lock_key
    assert a_result[0].dispatched == 0 and services.redis.pttl(lock_key) > 0
    b_busy.opened.set()
    thread_b.join(5)
    assert b_result[0].dispatched == 1 and services.redis.get(lock_key) is None
    execute(services, invoker.dispatches, S0)
    next_slot_fires(services, invoker, target, job_id, S0 + HOUR, {S0: "succeeded"})


def test_a_poller_frozen_between_claim_and_insert_while_maintenance_rewinds(
    services: Services, invoker: RecordingInvoker, target: Target, second_services: Callable[[int], Services],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Break: poller A claims the slot and freezes before inserting it, long enough for maintenance to
    take the claim for lost and rewind it, and for poller B to record and dispatch the slot; then A resumes.
    Must hold: A's late insert records nothing, so the slot is dispatched and sent once."""
    job_id = _hourly_job(services, target)
    a = Poller(second_services(200))
    frozen = Gate()
    thread_a, a_result = _thread(lambda: a.tick(to_ms(S0)))
    calls = itertools.count()  # A's write is the first (it runs on the poller's record thread, not thread_a)
    monkeypatch.setattr(executions_store, "record_claims", frozen.wrap(
        executions_store.record_claims, only=lambda: next(calls) == 0))
    thread_a.start()
    assert frozen.arrived.wait(5)
    assert wait_for(lambda: not services.redis.exists(due_index(services).tick_lock_key))  # A's lock expires
    assert run_maintenance(services, S0 + timedelta(seconds=15)).rewound == 1
    assert Poller(services).tick(to_ms(S0) + 15_000).dispatched == 1
    frozen.opened.set()
    thread_a.join(5)
    assert a_result[0].dispatched == 0
    assert execute(services, invoker.dispatches, S0 + timedelta(seconds=15)) == ["succeeded"]
    next_slot_fires(services, invoker, target, job_id, S0 + HOUR, {S0: "succeeded"})
