"""A tenant's runs in flight (max_runs_in_flight) against real Postgres and Redis: the runs past it wait,
recorded, while another tenant's all go out; they go out once places free, or when places lapse."""
from __future__ import annotations

import threading
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from tests.integration.helpers import UnreadTarget, due_index, executor_at, insert_job
from tests.support import wait_for
from tests.support import FakeClock, score_of
from tickwork.dispatch.poller import Poller
from tickwork.models import Dispatch
from tickwork.tenant import operator
from tickwork.ops.maintenance import redispatch_awaiting
from tickwork.runs import executor
from tickwork.store.tenants import create_tenant
from tickwork.timeutil import to_ms
from tickwork.wiring import Services, build_services

T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)
DAILY = "0 0 12 * * *"  # fires at T0 and not again within any of these tests
DELAYED_2 = "delayed: tenant has 2 runs in flight (max_runs_in_flight 2)"


def tenant(svc: Services, name: str, max_runs_in_flight: int | None = None) -> str:
    with svc.db.connection() as conn:
        tenant_id = create_tenant(conn, name)
    if max_runs_in_flight is not None:
        operator.set_quotas(svc.db, svc.settings, {"tenant": name, "max_runs_in_flight": max_runs_in_flight})
    return tenant_id


def runs(svc: Services, tenant_id: str) -> dict[str, tuple[Any, ...]]:
    """The tenant's runs by id: (status, last_error)."""
    with svc.db.connection() as conn:
        rows = conn.execute("SELECT id::text, status, last_error FROM executions WHERE tenant_id = %s",
                            (tenant_id,)).fetchall()
    return {row[0]: (row[1], row[2]) for row in rows}


def dispatched(invoker: Any, tenant_runs: dict[str, Any]) -> list[Dispatch]:
    return [d for d in invoker.dispatches if d.execution_id in tenant_runs]


def test_a_tenant_past_its_runs_in_flight_waits_and_another_tenant_does_not(
    services: Services, invoker: Any, target: Any,
) -> None:
    a, b = tenant(services, "a", max_runs_in_flight=2), tenant(services, "b")
    a_jobs = [insert_job(services, schedule=DAILY, next_run_at=T0, tenant_id=a, url=f"{target.url}/a")
              for _ in range(4)]
    for _ in range(4):
        insert_job(services, schedule=DAILY, next_run_at=T0, tenant_id=b, url=f"{target.url}/b")

    result = Poller(services).tick(to_ms(T0) + 50)
    a_runs, b_runs = runs(services, a), runs(services, b)
    assert len(a_runs) == 4 and len(b_runs) == 4
    assert len(dispatched(invoker, b_runs)) == 4  # the other tenant: every run goes out
    first = dispatched(invoker, a_runs)
    assert len(first) == 2 and all(d.tenant_id == a for d in first)
    held = sorted(set(a_runs) - {d.execution_id for d in first})
    assert [a_runs[i] for i in held] == [("queued", DELAYED_2)] * 2
    assert result.delayed == 2 and result.dispatched == 6

    # While A's first two are in flight (their target has not answered), its others keep waiting.
    Poller(services).tick(to_ms(T0) + 1100)
    assert len(dispatched(invoker, a_runs)) == 2

    # A's first two end: their executor gives their places back, and the waiting runs go out.
    clock = FakeClock(T0)
    executor_at(services, clock).run(first)
    executor.give_back(services, first)
    Poller(services).tick(to_ms(T0) + 2200)
    every = dispatched(invoker, a_runs)
    assert sorted(d.execution_id for d in every[2:]) == held
    # Nothing lost, nothing twice: one run per job and slot, each handed to an executor once.
    assert sorted(d.execution_id for d in every) == sorted(a_runs)
    assert len(runs(services, a)) == len(a_jobs)
    assert {runs(services, a)[i][0] for i in held} == {"queued"}


def test_a_place_whose_executor_died_lapses(services: Services, invoker) -> None:
    """The executor of A's only place never reports: the place frees itself at the attempt's latest end
    (the longest request plus the lost margin after its instant), and the run held back then goes out."""
    a = tenant(services, "a", max_runs_in_flight=1)
    for _ in range(2):
        insert_job(services, schedule=DAILY, next_run_at=T0, tenant_id=a)
    Poller(services).tick(to_ms(T0) + 50)
    assert len(invoker.dispatches) == 1
    lapse_ms = (services.settings.max_request_timeout_seconds + services.settings.lost_margin_seconds) * 1000

    Poller(services).tick(to_ms(T0) + lapse_ms - 30_000)
    assert len(invoker.dispatches) == 1
    Poller(services).tick(to_ms(T0) + lapse_ms + 1_000)
    assert len(invoker.dispatches) == 2
    assert len({d.execution_id for d in invoker.dispatches}) == 2


def test_the_executor_gives_places_back_except_for_a_duplicate_delivery(services: Services) -> None:
    """A run skipped by its overlap policy gives its place back; a duplicate delivery of an attempt another
    executor is running does not take that executor's place away (it gives it back when it ends)."""
    a = tenant(services, "a")
    job_id = insert_job(services, schedule=DAILY, next_run_at=T0, tenant_id=a, index=False)
    running, queued = "11111111-1111-1111-1111-111111111111", "22222222-2222-2222-2222-222222222222"
    with services.db.connection() as conn:
        conn.execute("UPDATE jobs SET overlap = 'skip' WHERE id = %s", (job_id,))
        for run_id, slot, status, attempts in [(running, T0, "running", 1),
                                               (queued, T0 + timedelta(days=1), "queued", 0)]:
            conn.execute("INSERT INTO executions (id, tenant_id, job_id, scheduled_for, trigger, status,"
                         " attempt_count) VALUES (%s, %s, %s, %s, 'schedule', %s, %s)",
                         (run_id, a, job_id, slot, status, attempts))
    key = services.in_flight.key(a)
    services.redis.zadd(key, {f"{running}:1": to_ms(T0) + 180_000, f"{queued}:1": to_ms(T0) + 180_000})
    # Their instants long past on any date: the executor sends (or skips) at once.
    event = [Dispatch(running, 1, 0, tenant_id=a), Dispatch(queued, 1, 0, tenant_id=a)]
    assert executor.handle_event(services, event) == {"outcomes": ["duplicate", "skipped"]}
    assert services.redis.zrange(key, 0, -1) == [f"{running}:1"]


def test_the_sweeper_leaves_a_delayed_run_where_it_waits(services: Services) -> None:
    a = tenant(services, "a", max_runs_in_flight=1)
    for _ in range(2):
        insert_job(services, schedule=DAILY, next_run_at=T0, tenant_id=a)
    Poller(services).tick(to_ms(T0) + 50)
    (waiting,) = [i for i, (status, note) in runs(services, a).items() if note]
    member = f"e:{waiting}:1"
    due = score_of(due_index(services), member)
    assert due == to_ms(T0) + 1050
    (sent,) = [i for i in runs(services, a) if i != waiting]
    with services.db.connection() as conn:
        conn.execute("UPDATE executions SET created_at = %s WHERE tenant_id = %s", (T0, a))
        # Only the run whose executor never started it is re-dispatched; the one waiting stays as it was.
        assert redispatch_awaiting(conn, due_index(services), T0 + timedelta(minutes=2), services.settings) == 1
    assert score_of(due_index(services), f"e:{sent}:1") == to_ms(T0 + timedelta(minutes=2))
    assert score_of(due_index(services), member) == due


def test_a_run_held_back_past_its_catch_up_window_is_missed_not_fired(services: Services, invoker) -> None:
    a = tenant(services, "a", max_runs_in_flight=1)
    for _ in range(2):
        insert_job(services, schedule=DAILY, next_run_at=T0, tenant_id=a)
    Poller(services).tick(to_ms(T0) + 50)
    Poller(services).tick(to_ms(T0) + 301_000)  # the place has lapsed, but the default window is 300 s
    assert len(invoker.dispatches) == 1
    statuses = sorted(runs(services, a).values(), key=lambda row: row[0])
    assert statuses[0] == ("missed", "missed: held back by the tenant's max_runs_in_flight past the job's "
                                     "catch-up window (300 s)")
    assert statuses[1] == ("queued", None)


def test_catch_up_latest_runs_only_the_latest_of_the_slots_held_back(services: Services, invoker) -> None:
    a = tenant(services, "a", max_runs_in_flight=1)
    insert_job(services, schedule=DAILY, next_run_at=T0, tenant_id=a)  # takes the only place, and keeps it
    T10, T20 = T0 + timedelta(seconds=10), T0 + timedelta(seconds=20)
    every_10s = insert_job(services, schedule="*/10 * * * * *", next_run_at=T10, tenant_id=a)
    Poller(services).tick(to_ms(T0) + 50)
    Poller(services).tick(to_ms(T0) + 9_000)  # the slot at T10 is held back
    Poller(services).tick(to_ms(T0) + 19_000)  # the slot at T20 is claimed: T10's run would only be late now
    # The held run may be looked at in that tick before T20's row is written (a backlog batch beside the
    # on-time one); then it is at its next look, 2.5 s later.
    Poller(services).tick(to_ms(T0) + 22_000)
    with services.db.connection() as conn:
        rows = conn.execute("SELECT scheduled_for, status, last_error FROM executions WHERE job_id = %s"
                            " ORDER BY scheduled_for", (every_10s,)).fetchall()
    assert [(r[0], r[1]) for r in rows] == [(T10, "missed"), (T20, "queued")]
    assert "catch-up latest" in rows[0][2]
    assert rows[1][2] == "delayed: tenant has 1 runs in flight (max_runs_in_flight 1)"
    assert len(invoker.dispatches) == 1


class _FailingInvoker:
    def invoke(self, dispatches: Any) -> None:
        raise RuntimeError("Lambda refused the invoke")


def test_a_poller_that_fails_after_taking_places_delays_the_run_and_never_counts_it_twice(
    services: Services, invoker: Any,
) -> None:
    """Break: the invoke fails after the run's place was taken. Must hold: the run stays queued, the sweeper
    puts its dispatch back, and it then goes out once, in the place it already holds (its tenant's only one)."""
    a = tenant(services, "a", max_runs_in_flight=1)
    insert_job(services, schedule=DAILY, next_run_at=T0, tenant_id=a)
    failing = build_services(services.settings, invoker=_FailingInvoker())
    try:
        with pytest.raises(RuntimeError):
            Poller(failing).tick(to_ms(T0) + 50)
    finally:
        failing.close()
    ((run_id, (status, _)),) = runs(services, a).items()
    assert status == "queued" and invoker.dispatches == []
    later = T0 + timedelta(seconds=services.settings.sweep_after_seconds + 1)
    with services.db.connection() as conn:
        conn.execute("UPDATE executions SET created_at = %s WHERE id = %s", (T0, run_id))
        assert redispatch_awaiting(conn, due_index(services), later, services.settings) == 1
    Poller(services).tick(to_ms(later))
    assert [(d.execution_id, d.tenant_id) for d in invoker.dispatches] == [(run_id, a)]
    assert services.redis.zcard(services.in_flight.key(a)) == 1


def test_a_stale_dispatch_of_an_attempt_already_made_takes_no_place(services: Services, invoker: Any) -> None:
    """A retry's dispatch next to a stale one of the attempt before it (a sweeper's copy): only the retry,
    which its run waits for, holds a place; the stale one goes to an executor as ever, which calls it a duplicate."""
    a = tenant(services, "a", max_runs_in_flight=5)
    job_id = insert_job(services, schedule=DAILY, next_run_at=T0 + timedelta(days=1), tenant_id=a)
    run_id = "33333333-3333-3333-3333-333333333333"
    with services.db.connection() as conn:
        conn.execute("INSERT INTO executions (id, tenant_id, job_id, scheduled_for, trigger, status, attempt_count,"
                     " next_attempt_at) VALUES (%s, %s, %s, %s, 'schedule', 'retrying', 1, %s)",
                     (run_id, a, job_id, T0, T0))
    index = due_index(services)
    index.schedule_execution(run_id, 1, to_ms(T0))
    index.schedule_execution(run_id, 2, to_ms(T0))
    Poller(services).tick(to_ms(T0) + 50)
    assert sorted((d.attempt, d.tenant_id) for d in invoker.dispatches) == [(1, ""), (2, a)]
    assert services.redis.zrange(services.in_flight.key(a), 0, -1) == [f"{run_id}:2"]


def test_a_run_gives_its_place_back_when_it_ends_not_when_its_invocation_does(
    services: Services, invoker: Any, target: Any,
) -> None:
    """Runs of several tenants share an invocation: one that has ended must not keep its place while a run of
    the same invocation waits on a target that never answers (its tenant's places would run out behind it)."""
    a = tenant(services, "a")
    silent = UnreadTarget()
    slow_job = insert_job(services, schedule=DAILY, next_run_at=T0, tenant_id=a, url=silent.url + "/slow",
                          timeout_seconds=30)
    insert_job(services, schedule=DAILY, next_run_at=T0, tenant_id=a, url=target.url + "/fast")
    Poller(services).tick(to_ms(T0) + 50)
    # Their instants long past on any date: the executor sends both at once.
    event = [replace(d, fire_at_ms=0) for d in invoker.dispatches]
    assert len(event) == 2
    key = services.in_flight.key(a)
    assert len(services.redis.zrange(key, 0, -1)) == 2
    with services.db.connection() as conn:
        (slow_run,) = conn.execute("SELECT id::text FROM executions WHERE job_id = %s", (slow_job,)).fetchone()
    worker = threading.Thread(target=executor.handle_event, args=(services, event))
    worker.start()
    try:
        assert wait_for(lambda: services.redis.zrange(key, 0, -1) == [f"{slow_run}:1"])
        assert runs(services, a)[slow_run][0] == "running"
    finally:
        silent.close()
        worker.join()
    assert services.redis.zrange(key, 0, -1) == []
