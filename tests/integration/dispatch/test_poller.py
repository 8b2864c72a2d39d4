"""Poller ticks against real Postgres and Redis."""
from __future__ import annotations

import json
import threading
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import psycopg
import pytest

from tests.integration.helpers import due_index, executions, insert_job
from tests.support import hold_tick_lock, mark_built, score_of
from tickwork.dueindex import specs as dueindex_specs
from tickwork.dispatch.poller import Poller, TickResult, handle_tick
from tickwork.dueindex.entries import Claim
from tickwork.errors import ConfigurationError
from tickwork.ops.maintenance import run_maintenance
from tickwork.store import executions as executions_store
from tickwork.store import jobs as jobs_store
from tickwork.timeutil import from_ms, to_ms
from tickwork.wiring import Services, build_services

T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)


def test_due_job_gets_one_execution_and_moves_to_its_next_slot(services: Services, invoker) -> None:
    job_id = insert_job(services, schedule="*/2 * * * * *", next_run_at=T0)
    result = Poller(services).tick(to_ms(T0) + 50)
    rows = executions(services, job_id)
    # Lookahead claims the slot at T0 and the one at T0+2s only if it falls in the window (it does not).
    assert [(r[1], r[2]) for r in rows] == [(T0, "queued")]
    assert [(d.execution_id, d.attempt, d.fire_at_ms) for d in invoker.dispatches] == [(rows[0][0], 1, to_ms(T0))]
    assert score_of(due_index(services), f"j:{job_id}") == to_ms(T0) + 2000
    # One statement records the slot and returns its tenant for its place in flight (tickwork.dispatch.budget).
    assert result.dispatched == 1 and result.postgres_round_trips == 1


def test_lookahead_claims_slots_due_before_the_next_tick(services: Services, invoker) -> None:
    insert_job(services, schedule="*/2 * * * * *", next_run_at=T0 + timedelta(seconds=2))
    Poller(services).tick(to_ms(T0) + 1500)
    assert [d.fire_at_ms for d in invoker.dispatches] == [to_ms(T0) + 2000]


def test_nothing_due_dispatches_nothing(services: Services, invoker) -> None:
    insert_job(services, schedule="*/2 * * * * *", next_run_at=T0 + timedelta(minutes=5))
    mark_built(due_index(services), to_ms(T0))
    result = Poller(services).tick(to_ms(T0))
    assert result.dispatched == 0 and invoker.dispatches == []
    assert result.redis_round_trips == 3 and result.postgres_round_trips == 0


def test_paused_job_left_in_the_index_is_not_run(services: Services, invoker) -> None:
    job_id = insert_job(services, schedule="* * * * *", next_run_at=T0)
    with services.db.connection() as conn:
        conn.execute("UPDATE jobs SET status = 'paused' WHERE id = %s", (job_id,))
    Poller(services).tick(to_ms(T0))
    assert executions(services, job_id) == [] and invoker.dispatches == []


def test_a_tick_costs_constant_round_trips_per_batch(services: Services, invoker) -> None:
    for _ in range(120):
        insert_job(services, schedule="* * * * *", next_run_at=T0)
    mark_built(due_index(services), to_ms(T0))
    small_batches = build_services(replace(services.settings, batch_size=50), invoker=invoker)
    try:
        result = Poller(small_batches).tick(to_ms(T0))
    finally:
        small_batches.close()
    assert result.dispatched == 120 and result.batches == 3
    # lock + (fetch + claim + runs in flight) per batch + a final empty fetch + unlock; per batch one insert,
    # which returns the new runs' tenants for their places in flight.
    assert result.redis_round_trips == 1 + 3 * 3 + 1 + 1
    assert result.postgres_round_trips == 3


def test_two_pollers_at_once_dispatch_each_slot_exactly_once(services: Services, invoker) -> None:
    """Both pollers skip the tick lock and race on the same 1,000 due jobs: Redis CAS plus the
    unique execution row must still give exactly one dispatch per (job, slot)."""
    job_ids = [insert_job(services, schedule="* * * * *", next_run_at=T0) for _ in range(1000)]
    with services.db.connection() as conn:  # one tenant: room for all its runs in flight at once
        conn.execute("UPDATE tenants SET max_runs_in_flight = 1000")
    second = build_services(services.settings, invoker=invoker)
    pollers = [Poller(services), Poller(second)]
    barrier = threading.Barrier(2)

    def run(poller: Poller) -> None:
        barrier.wait()
        poller._drain(to_ms(T0) + 10, TickResult(locked=True))

    threads = [threading.Thread(target=run, args=(p,)) for p in pollers]
    [t.start() for t in threads]
    [t.join() for t in threads]
    second.close()
    assert len(invoker.dispatches) == 1000
    assert len({d.execution_id for d in invoker.dispatches}) == 1000
    with services.db.connection() as conn:
        count = conn.execute("SELECT count(*), count(DISTINCT job_id) FROM executions").fetchone()
    assert count == (1000, 1000)
    assert all(score_of(due_index(services), f"j:{j}") == to_ms(T0) + 60_000 for j in job_ids[:20])


def test_postgres_alone_refuses_a_slot_recorded_twice(services: Services) -> None:
    """Even if two callers both got past Redis, only the first insert of a slot returns a row."""
    job_id = insert_job(services, schedule="* * * * *", next_run_at=T0)
    slot = executions_store.Slot(job_id, T0, T0 + timedelta(minutes=1), 1, T0)
    with services.db.connection() as conn:
        first = executions_store.record_claims(conn, [slot])
        second = executions_store.record_claims(conn, [slot])
    assert len(first.runs) == 1 and second.runs == []


def test_stale_schedule_version_is_not_recorded(services: Services) -> None:
    job_id = insert_job(services, schedule="* * * * *", next_run_at=T0)
    with services.db.connection() as conn:
        conn.execute("UPDATE jobs SET version = 2 WHERE id = %s", (job_id,))
        recorded = executions_store.record_claims(conn, [executions_store.Slot(job_id, T0, T0, 1, T0)])
    assert recorded.runs == []


def test_one_shot_entries_are_dispatched_once(services: Services, invoker) -> None:
    index = due_index(services)
    index.schedule_execution("11111111-1111-1111-1111-111111111111", 2, to_ms(T0))
    Poller(services).tick(to_ms(T0))
    Poller(services).tick(to_ms(T0) + 1000)
    assert [(d.execution_id, d.attempt) for d in invoker.dispatches] == [("11111111-1111-1111-1111-111111111111", 2)]


def test_missing_spec_is_restored_from_postgres(services: Services, invoker) -> None:
    job_id = insert_job(services, schedule="* * * * *", next_run_at=T0)
    services.redis.hdel(due_index(services).specs_key, job_id)
    Poller(services).tick(to_ms(T0))
    assert len(executions(services, job_id)) == 1


def test_index_entry_of_a_deleted_job_is_dropped(services: Services, invoker) -> None:
    index = due_index(services)
    index.schedule_execution("x", 1, 0)
    services.redis.zadd(index.due_key, {"j:00000000-0000-0000-0000-00000000dead": to_ms(T0)})
    Poller(services).tick(to_ms(T0))
    assert score_of(index, "j:00000000-0000-0000-0000-00000000dead") is None


def test_poller_stopped_two_hours_respects_the_catch_up_window(services: Services, invoker) -> None:
    """Break: the poller does not tick for 2 hours (per-minute job, 5-minute catch-up window).
    Must hold: one catch-up run (the latest slot in the window), every skipped slot accounted for in
    one `missed` row, the next future slot scheduled, and no burst of stale runs."""
    job_id = insert_job(services, schedule="* * * * *", next_run_at=T0)
    now = T0 + timedelta(hours=2, seconds=5)
    assert Poller(services).tick(to_ms(now)).missed == 120
    Poller(services).tick(to_ms(now) + 1000)
    rows = executions(services, job_id)
    assert [(r[1], r[2]) for r in rows] == [(T0, "missed"), (T0 + timedelta(hours=2), "queued")]
    with services.db.connection() as conn:
        assert conn.execute("SELECT missed_count FROM executions WHERE status = 'missed'").fetchone() == (120,)
    assert len(invoker.dispatches) == 1
    assert from_ms(score_of(due_index(services), f"j:{job_id}")) == T0 + timedelta(hours=2, minutes=1)


def test_a_tick_out_of_planning_time_leaves_the_rest_due_for_the_next_tick(services: Services, invoker) -> None:
    """Break: planning is slow (a clock that moves 0.1 s each time the tick asks it; a 0.35 s budget).
    Must hold: each tick stops planning at its budget and claims only what it planned; the rest stays due
    at its slot and the following ticks claim it: every slot once, on time, none missed."""
    job_ids = [insert_job(services, schedule="* * * * *", next_run_at=T0) for _ in range(10)]
    mark_built(due_index(services), to_ms(T0))
    seconds = iter(range(10_000))
    poller = Poller(services, plan_seconds=0.35, clock=lambda: next(seconds) / 10)
    results = [poller.tick(to_ms(T0) + 100 * n) for n in range(4)]
    assert [(r.claimed, r.unplanned) for r in results] == [(3, 7), (3, 4), (3, 1), (1, 0)]
    for job_id in job_ids:
        assert [(r[1], r[2]) for r in executions(services, job_id)] == [(T0, "queued")]
    assert sorted(d.fire_at_ms for d in invoker.dispatches) == [to_ms(T0)] * 10


def test_a_slot_older_than_a_zero_window_is_missed_not_fired(services: Services, invoker) -> None:
    job_id = insert_job(services, schedule="0 * * * *", next_run_at=T0)
    with services.db.connection() as conn:
        conn.execute("UPDATE jobs SET catchup_window_seconds = 0 WHERE id = %s", (job_id,))
        job = jobs_store.get_jobs(conn, [job_id])[0]
    dueindex_specs.index_job(due_index(services), job)
    Poller(services).tick(to_ms(T0 + timedelta(minutes=10)))
    assert [(r[1], r[2]) for r in executions(services, job_id)] == [(T0, "missed")]
    assert invoker.dispatches == []
    assert from_ms(score_of(due_index(services), f"j:{job_id}")) == T0 + timedelta(hours=1)


def test_a_held_tick_lock_makes_the_second_poller_skip(services: Services, invoker) -> None:
    insert_job(services, schedule="* * * * *", next_run_at=T0)
    assert hold_tick_lock(due_index(services), "other", 5_000)
    result = Poller(services).tick(to_ms(T0))
    assert not result.locked and invoker.dispatches == []
    assert services.redis.get(due_index(services).tick_lock_key) == "other"


def test_each_second_is_ticked_once_however_many_pollers_wake_for_it(services: Services, invoker) -> None:
    """Two tick loops side by side (or a duplicated execution) wake for the same second: one works."""
    insert_job(services, schedule="* * * * * *", next_run_at=T0)
    second = to_ms(T0) // 1000
    assert Poller(services).tick(to_ms(T0) + 500, second).locked
    assert not Poller(services).tick(to_ms(T0) + 520, second).locked  # the other loop, 20 ms later
    assert Poller(services).tick(to_ms(T0) + 1500, second + 1).locked
    assert sorted(d.fire_at_ms for d in invoker.dispatches) == [to_ms(T0) + i * 1000 for i in range(4)]


def test_a_second_kept_out_by_a_running_tick_is_left_to_the_next_arrival(services: Services, invoker) -> None:
    second = to_ms(T0) // 1000
    index = due_index(services)
    assert hold_tick_lock(index, "a tick of the previous second, still running", 5_000)
    assert not Poller(services).tick(to_ms(T0) + 500, second).locked
    assert index.release_tick_lock("a tick of the previous second, still running")
    assert Poller(services).tick(to_ms(T0) + 700, second).locked


def test_the_tick_handler_claims_as_of_half_past_and_names_the_next_whole_second(services: Services, invoker) -> None:
    """The loop's Wait ends on the whole second; the tick runs at once (no Lambda waiting half of every
    second) and claims as of half past: the same slots, each 1.5 s ahead of that point."""
    insert_job(services, schedule="* * * * * *", next_run_at=T0)
    at = to_ms(T0) / 1000 + 0.04  # the Wait ended on the second; the invoke took 40 ms
    answer = handle_tick(services, lambda: at)
    assert answer["locked"] and answer["next_tick_at"] == "2026-11-30T12:00:01.000Z"
    # As of half past with the 1.5 s lookahead: the first slot late, the next two 1.5 s ahead.
    assert sorted(d.fire_at_ms for d in invoker.dispatches) == [to_ms(T0), to_ms(T0) + 1000, to_ms(T0) + 2000]
    assert not handle_tick(services, lambda: at + 0.3)["locked"]  # a duplicated invoke for the same second
    late = to_ms(T0) / 1000 + 1.7  # a retried invoke of the next second, after its point: claims as of then
    answer = handle_tick(services, lambda: late)
    assert answer["locked"] and answer["next_tick_at"] == "2026-11-30T12:00:02.000Z"
    assert max(d.fire_at_ms for d in invoker.dispatches) == to_ms(T0) + 3000


def test_a_flushed_index_is_rebuilt_from_postgres_at_the_next_tick(services: Services, invoker) -> None:
    """Break: Redis loses every key (FLUSHALL, failover to an empty replica). Must hold: the next tick
    rebuilds the index from Postgres and the due job runs once; the following tick runs nothing more."""
    job_id = insert_job(services, schedule="* * * * *", next_run_at=T0)
    Poller(services).tick(to_ms(T0) - 5_000)  # builds the marker; nothing due yet
    for key in services.redis.scan_iter(match="{" + services.settings.namespace + "}:*"):
        services.redis.delete(key)
    result = Poller(services).tick(to_ms(T0))
    assert result.rebuilt and result.dispatched == 1
    assert Poller(services).tick(to_ms(T0) + 100).dispatched == 0
    assert [r[1] for r in executions(services, job_id)] == [T0]
    assert score_of(due_index(services), f"j:{job_id}") == to_ms(T0) + 60_000


def test_a_claim_lost_before_postgres_is_recorded_missed_by_the_next_claim(services: Services, invoker) -> None:
    """Break: a poller advanced a per-second job in Redis and died before the Postgres insert.
    Must hold: the next claim records the lost slot as missed (never silently gone) and runs its own."""
    job_id = insert_job(services, schedule="* * * * * *", next_run_at=T0)
    due_index(services).claim([Claim(f"j:{job_id}", to_ms(T0), to_ms(T0) + 1000)])  # the crashed claim
    Poller(services).tick(to_ms(T0) + 100)
    assert [(r[1], r[2]) for r in executions(services, job_id)] == [
        (T0, "missed"), (T0 + timedelta(seconds=1), "queued")]


def test_two_slots_of_one_job_claimed_in_one_tick_are_recorded_in_order(
    services: Services, invoker, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Break: the lookahead reaches two slots of an every-second job, claimed in two batches of one tick,
    and the first batch's write is the slower of the two in flight.
    Must hold: both slots are recorded queued and dispatched; neither is taken for a lost claim."""
    job_id = insert_job(services, schedule="* * * * * *", next_run_at=T0)
    mark_built(due_index(services), to_ms(T0))
    real_record = executions_store.record_claims
    second_written = threading.Event()

    def first_write_slow(conn, slots):  # type: ignore[no-untyped-def]
        if [slot.claimed for slot in slots] == [T0]:
            # Without ordering the second write runs meanwhile; with it, it is not even submitted yet.
            second_written.wait(0.5)
            return real_record(conn, slots)
        recorded = real_record(conn, slots)
        second_written.set()
        return recorded

    monkeypatch.setattr(executions_store, "record_claims", first_write_slow)
    one_per_batch = build_services(replace(services.settings, batch_size=1), invoker=invoker)
    try:
        result = Poller(one_per_batch).tick(to_ms(T0) - 500)  # the 1.5 s lookahead reaches T0 and T0+1s
    finally:
        one_per_batch.close()
    assert result.missed == 0
    rows = executions(services, job_id)
    assert [(r[1], r[2]) for r in rows] == [(T0, "queued"), (T0 + timedelta(seconds=1), "queued")]
    assert sorted(d.fire_at_ms for d in invoker.dispatches) == [to_ms(T0), to_ms(T0) + 1000]


def test_a_claim_recorded_after_a_later_one_still_runs_its_slot_once(services: Services) -> None:
    """Break: two ticks overlap (the first outlived its tick lock on a loaded machine): tick A claimed T0 in
    Redis, tick B then claimed T0+1s and recorded it first, accounting T0 as lost.
    Must hold: A's late record turns that row into T0's queued run and A alone dispatches it; a second late
    record of T0 dispatches nothing; the job's next run is not moved back."""
    second = timedelta(seconds=1)
    job_id = insert_job(services, schedule="* * * * * *", next_run_at=T0)
    a = executions_store.Slot(job_id, T0, T0 + second, 1, T0)
    b = executions_store.Slot(job_id, T0 + second, T0 + 2 * second, 1, T0 + second)
    with services.db.connection() as conn:
        later = executions_store.record_claims(conn, [b])
        assert [(r[1], r[2]) for r in executions(services, job_id)] == [(T0, "missed"), (T0 + second, "queued")]
        late = executions_store.record_claims(conn, [a])
        again = executions_store.record_claims(conn, [a])
        next_run_at = conn.execute("SELECT next_run_at FROM jobs WHERE id = %s", (job_id,)).fetchone()[0]
    rows = executions(services, job_id)
    assert [(r[1], r[2]) for r in rows] == [(T0, "queued"), (T0 + second, "queued")]
    assert [r.execution_id for r in later.runs] == [rows[1][0]] and [r.execution_id for r in late.runs] == [rows[0][0]]
    assert again.runs == [] and next_run_at == T0 + 2 * second


def test_a_late_claim_does_not_revive_a_slot_the_catch_up_policy_skipped(services: Services) -> None:
    """A late claim whose slot was recorded missed by catch-up (not as a lost claim) stays refused."""
    second = timedelta(seconds=1)
    job_id = insert_job(services, schedule="* * * * * *", next_run_at=T0)
    skipped = executions_store.Slot(job_id, T0, T0 + 2 * second, 1, T0 + second, missed_count=1, missed_note="behind")
    with services.db.connection() as conn:
        executions_store.record_claims(conn, [skipped])
        late = executions_store.record_claims(conn, [executions_store.Slot(job_id, T0, T0 + second, 1, T0)])
    assert late.runs == []
    assert [(r[1], r[2]) for r in executions(services, job_id)] == [(T0, "missed"), (T0 + second, "queued")]


def test_a_tick_reports_its_counts_as_cloudwatch_metrics(services: Services, invoker, monkeypatch, capsys) -> None:
    insert_job(services, schedule="* * * * *", next_run_at=T0)
    insert_job(services, schedule="* * * * *", next_run_at=T0 - timedelta(hours=1))
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    handle_tick(services, lambda: to_ms(T0) / 1000)
    (line,) = [json.loads(x) for x in capsys.readouterr().out.splitlines() if '"_aws"' in x]
    names = {m["Name"] for m in line["_aws"]["CloudWatchMetrics"][0]["Metrics"]}
    assert line["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "Tickwork"
    assert (sum(line["Dispatched"]), sum(line["MissedRuns"])) == (2, 60) and {"Dispatched", "MissedRuns"} <= names


def test_a_poller_without_an_executor_refuses_before_claiming(services: Services) -> None:
    job_id = insert_job(services, schedule="* * * * *", next_run_at=T0)
    without = build_services(services.settings, invoker=None)
    try:
        with pytest.raises(ConfigurationError, match="EXECUTOR_FUNCTION_NAME"):
            Poller(without).tick(to_ms(T0))
    finally:
        without.close()
    assert executions(services, job_id) == []
    assert score_of(due_index(services), f"j:{job_id}") == to_ms(T0)


def test_a_failed_batch_write_fails_the_tick_once_the_other_writes_are_done(
    services: Services, invoker, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Writes run beside the next batch's claim: the second of three fails (Postgres gone for it).
    Must hold: the tick raises only after the first and third are recorded and dispatched; the second
    batch's claims are left for maintenance to rewind, and the next tick runs them once."""
    job_ids = [insert_job(services, schedule="* * * * *", next_run_at=T0) for _ in range(30)]
    mark_built(due_index(services), to_ms(T0))
    real_record = executions_store.record_claims
    # Batches are fetched in index order (equal scores: by member), so the second holds these jobs. Failing
    # by content, not by call order: two writes run at once and either may call first.
    second_batch = set(sorted(job_ids)[10:20])

    def second_write_fails(conn, slots):  # type: ignore[no-untyped-def]
        if {slot.job_id for slot in slots} == second_batch:
            raise psycopg.OperationalError("connection lost")
        return real_record(conn, slots)

    monkeypatch.setattr(executions_store, "record_claims", second_write_fails)
    small_batches = build_services(replace(services.settings, batch_size=10), invoker=invoker)
    try:
        with pytest.raises(psycopg.OperationalError):
            Poller(small_batches).tick(to_ms(T0))
    finally:
        small_batches.close()
    monkeypatch.undo()
    assert len(invoker.dispatches) == 20
    assert sum(len(executions(services, job_id)) for job_id in job_ids) == 20
    assert run_maintenance(services, T0 + timedelta(seconds=30)).rewound == 10
    Poller(services).tick(to_ms(T0) + 30_000)
    # (Maintenance also re-dispatched the 20 recorded runs, still queued as no executor ran them.)
    assert len({d.execution_id for d in invoker.dispatches}) == 30
    assert all(len(executions(services, job_id)) == 1 for job_id in job_ids)
