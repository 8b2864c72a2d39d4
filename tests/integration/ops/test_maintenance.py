"""The maintenance pass against real Postgres and Redis: reconcile, sweep, retention, lock, handler."""
from __future__ import annotations

import itertools
import json
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from tests.conftest import load_event
from tests.integration.helpers import attempts, due_index, executions, insert_job
from tests.support import mark_built, score_of
from tickwork.dispatch.poller import Poller
from tickwork.ops.maintenance import BATCH, RETENTION_UNTIL_SECONDS, run_maintenance
from tickwork.store import audit as audit_store
from tickwork.store import idempotency as idempotency_store
from tickwork.store import maintenance as maintenance_store
from tickwork.store import notifications as notifications_store
from tickwork.store import quotas as quotas_store
from tickwork.store.tenants import create_tenant, find_tenant
from tickwork.timeutil import to_ms
from tickwork.wiring import Services

# Rows get created_at from the database clock, so these tests live in real time.
NOW = datetime.now(timezone.utc).replace(microsecond=0)
_slots = itertools.count(1)


def insert_execution(
    svc: Services, job_id: str, *, status: str, created_at: datetime = NOW, attempt_count: int = 0,
    attempt_started_at: datetime | None = None, next_attempt_at: datetime | None = None,
) -> str:
    execution_id = str(uuid.uuid4())
    with svc.db.connection() as conn:
        conn.execute(
            "INSERT INTO executions (id, tenant_id, job_id, scheduled_for, trigger, status, attempt_count,"
            " created_at, started_at, attempt_started_at, next_attempt_at)"
            " SELECT %s, tenant_id, id, %s, 'schedule', %s, %s, %s, %s, %s, %s FROM jobs WHERE id = %s",
            (execution_id, NOW - timedelta(hours=next(_slots)), status, attempt_count, created_at,
             attempt_started_at, attempt_started_at, next_attempt_at, job_id),
        )
    return execution_id


def set_job(svc: Services, job_id: str, **columns: Any) -> None:
    assignments = ", ".join(f"{name} = %s" for name in columns)
    with svc.db.connection() as conn:
        conn.execute(f"UPDATE jobs SET {assignments} WHERE id = %s", (*columns.values(), job_id))


def status_of(svc: Services, execution_id: str) -> tuple[str, int, datetime | None]:
    with svc.db.connection() as conn:
        return conn.execute(
            "SELECT status, attempt_count, next_attempt_at FROM executions WHERE id = %s", (execution_id,)
        ).fetchone()


def later_job(svc: Services, **job: Any) -> str:
    return insert_job(svc, schedule="* * * * *", next_run_at=NOW + timedelta(minutes=1), **job)


# ---------------------------------------------------------------- reconcile


def test_a_job_missing_from_an_intact_index_is_re_added_at_its_next_run(services: Services) -> None:
    """The marker survived, so no tick rebuilds: only the periodic pass notices the missing member."""
    job_id = later_job(services)
    index = due_index(services)
    mark_built(index, to_ms(NOW))
    index.remove_job(job_id)
    report = run_maintenance(services, NOW)
    assert report.locked and report.indexed == 1
    assert score_of(index, f"j:{job_id}") == to_ms(NOW + timedelta(minutes=1))
    assert services.redis.hget(index.specs_key, job_id) is not None


def test_paused_and_deleted_jobs_leave_the_index(services: Services) -> None:
    paused, deleted, active = later_job(services), later_job(services), later_job(services)
    set_job(services, paused, status="paused")
    set_job(services, deleted, status="deleted", next_run_at=None)
    report = run_maintenance(services, NOW)
    index = due_index(services)
    assert report.removed == 2
    assert score_of(index, f"j:{paused}") is None and score_of(index, f"j:{deleted}") is None
    assert score_of(index, f"j:{active}") is not None


def test_an_outdated_spec_is_rewritten_and_a_matching_index_is_left_alone(services: Services) -> None:
    """An API change whose index write failed: the job's catch-up window changed in Postgres only."""
    stale, fine = later_job(services), later_job(services)
    set_job(services, stale, catchup_window_seconds=42)
    index = due_index(services)
    score = score_of(index, f"j:{stale}")
    report = run_maintenance(services, NOW)
    assert report.indexed == 1
    assert json.loads(services.redis.hget(index.specs_key, stale))["cw"] == 42
    assert json.loads(services.redis.hget(index.specs_key, fine))["cw"] == 300
    assert score_of(index, f"j:{stale}") == score
    assert run_maintenance(services, NOW).indexed == 0


def test_a_claim_that_never_reached_postgres_is_rewound_to_next_run_at(services: Services, invoker) -> None:
    slot = NOW.replace(second=0)
    job_id = insert_job(services, schedule="* * * * *", next_run_at=slot)
    index = due_index(services)
    services.redis.zadd(index.due_key, {f"j:{job_id}": to_ms(slot) + 60_000})  # claimed, insert lost
    report = run_maintenance(services, slot + timedelta(seconds=30))
    assert report.rewound == 1 and score_of(index, f"j:{job_id}") == to_ms(slot)
    Poller(services).tick(to_ms(slot) + 30_000)
    assert [(r[1], r[2]) for r in executions(services, job_id)] == [(slot, "queued")]
    assert len(invoker.dispatches) == 1


def test_a_claim_younger_than_the_grace_is_left_alone(services: Services) -> None:
    slot = NOW - timedelta(seconds=3)  # a poller may be inserting it right now
    job_id = insert_job(services, schedule="* * * * *", next_run_at=slot)
    index = due_index(services)
    services.redis.zadd(index.due_key, {f"j:{job_id}": to_ms(slot) + 60_000})
    assert run_maintenance(services, NOW).rewound == 0
    assert score_of(index, f"j:{job_id}") == to_ms(slot) + 60_000


def test_rewinding_never_moves_a_score_forward_nor_adds_a_job(services: Services) -> None:
    index = due_index(services)
    index.put_job("early", {"v": 1}, 1_000)
    index.put_job("late", {"v": 1}, 9_000)
    assert index.rewind_jobs({"early": 5_000, "late": 5_000, "absent": 5_000}) == 1
    assert (score_of(index, "j:early"), score_of(index, "j:late"), score_of(index, "j:absent")) == (1_000, 5_000, None)


# ---------------------------------------------------------------- sweep


def test_a_run_queued_too_long_is_dispatched_again_once(services: Services, invoker) -> None:
    job_id = later_job(services)
    stuck = insert_execution(services, job_id, status="queued", created_at=NOW - timedelta(seconds=61))
    fresh = insert_execution(services, job_id, status="queued", created_at=NOW - timedelta(seconds=5))
    assert run_maintenance(services, NOW).redispatched == 1
    assert run_maintenance(services, NOW).redispatched == 0  # still in the index: not added twice
    index = due_index(services)
    assert score_of(index, f"e:{stuck}:1") == to_ms(NOW) and score_of(index, f"e:{fresh}:1") is None
    Poller(services).tick(to_ms(NOW))
    assert [(d.execution_id, d.attempt) for d in invoker.dispatches] == [(stuck, 1)]


def test_retries_missing_from_the_index_are_put_back(services: Services) -> None:
    job_id = later_job(services)
    overdue = insert_execution(services, job_id, status="retrying", attempt_count=1,
                               next_attempt_at=NOW - timedelta(seconds=90))
    ahead = insert_execution(services, job_id, status="retrying", attempt_count=2,
                             next_attempt_at=NOW + timedelta(minutes=10))
    due_now = insert_execution(services, job_id, status="retrying", attempt_count=1, next_attempt_at=NOW)
    assert run_maintenance(services, NOW).redispatched == 2
    index = due_index(services)
    assert score_of(index, f"e:{overdue}:2") == to_ms(NOW)
    assert score_of(index, f"e:{ahead}:3") == to_ms(NOW + timedelta(minutes=10))  # keeps its time
    assert score_of(index, f"e:{due_now}:2") is None  # a poller may be dispatching it right now


def test_an_attempt_running_past_its_timeout_is_retried_under_the_same_run(services: Services) -> None:
    job_id = later_job(services, retry={"strategy": "fixed", "max_attempts": 3, "delay_seconds": 7})
    started = NOW - timedelta(seconds=66)  # request timeout 5 s + margin 60 s
    run_id = insert_execution(services, job_id, status="running", attempt_count=1, attempt_started_at=started)
    report = run_maintenance(services, NOW)
    assert (report.retried, report.lost) == (1, 0)
    assert status_of(services, run_id) == ("retrying", 1, NOW + timedelta(seconds=7))
    (attempt,) = attempts(services, run_id)
    assert attempt[0:2] == (1, started) and attempt[3] is None
    assert attempt[4] == "lost: executor did not report within 65 s"
    assert score_of(due_index(services), f"e:{run_id}:2") == to_ms(NOW + timedelta(seconds=7))


def test_a_lost_attempts_retry_after_the_jobs_next_slot_ends_the_run_unless_the_policy_allows_it(
    services: Services,
) -> None:
    """The sweeper bounds its retries by the job's next slot as the executor does (retry.past_next_run)."""
    started = NOW - timedelta(seconds=66)
    ends = {}
    for allowed in (False, True):
        job_id = later_job(services, retry={"strategy": "fixed", "max_attempts": 3, "delay_seconds": 7,
                                            "jitter": "none", "past_next_run": allowed})
        # Its slot is hours ago and the job runs every minute: a retry at NOW + 7 s is past its next slot.
        ends[allowed] = insert_execution(services, job_id, status="running", attempt_count=1, attempt_started_at=started)
    report = run_maintenance(services, NOW)
    assert (report.retried, report.lost) == (1, 1)
    assert status_of(services, ends[False]) == ("lost", 1, None)
    (attempt,) = attempts(services, ends[False])
    assert attempt[4].startswith("lost: executor did not report within 65 s; not retried: the next attempt would be")
    assert score_of(due_index(services), f"e:{ends[False]}:2") is None
    assert status_of(services, ends[True]) == ("retrying", 1, NOW + timedelta(seconds=7))


def test_a_lost_attempt_of_a_paused_or_deleted_job_ends_lost_without_a_retry(services: Services) -> None:
    """Break: a paused or deleted job has no next slot, and that let the sweeper retry its lost attempts.
    Must hold: the run ends lost with the reason and no retry is queued (as the executor's, #22)."""
    started = NOW - timedelta(seconds=66)
    ends = {}
    for stop in ("paused", "deleted"):
        job_id = later_job(services, retry={"strategy": "fixed", "max_attempts": 3, "delay_seconds": 7})
        ends[stop] = insert_execution(services, job_id, status="running", attempt_count=1, attempt_started_at=started)
        set_job(services, job_id, status=stop, next_run_at=None)  # what a pause or delete leaves of the job
    report = run_maintenance(services, NOW)
    assert (report.retried, report.lost) == (0, 2)
    for stop, run_id in ends.items():
        assert status_of(services, run_id) == ("lost", 1, None)
        (attempt,) = attempts(services, run_id)
        assert attempt[4] == f"lost: executor did not report within 65 s; not retried: the job was {stop}"
        assert score_of(due_index(services), f"e:{run_id}:2") is None


def test_an_attempt_with_no_attempt_left_ends_lost(services: Services) -> None:
    job_id = later_job(services, retry={"strategy": "fixed", "max_attempts": 2, "delay_seconds": 1})
    run_id = insert_execution(services, job_id, status="running", attempt_count=2,
                              attempt_started_at=NOW - timedelta(minutes=5))
    assert run_maintenance(services, NOW).lost == 1
    assert status_of(services, run_id) == ("lost", 2, None)
    assert [a[0] for a in attempts(services, run_id)] == [2]
    assert score_of(due_index(services), f"e:{run_id}:3") is None


def test_an_attempt_within_its_timeout_plus_margin_keeps_running(services: Services) -> None:
    job_id = later_job(services)
    with services.db.connection() as conn:  # asks for 500 s; the executor caps it at 120 s
        conn.execute("UPDATE jobs SET request = request || '{\"timeout_seconds\": 500}' WHERE id = %s", (job_id,))
    recent = insert_execution(services, job_id, status="running", attempt_count=1,
                              attempt_started_at=NOW - timedelta(seconds=170))
    old = insert_execution(services, job_id, status="running", attempt_count=1,
                           attempt_started_at=NOW - timedelta(seconds=181))
    assert run_maintenance(services, NOW).retried == 1
    assert status_of(services, recent)[0] == "running" and status_of(services, old)[0] == "retrying"


def test_a_lost_run_releases_the_run_waiting_behind_it(services: Services) -> None:
    job_id = later_job(services, retry={"strategy": "fixed", "max_attempts": 1, "delay_seconds": 1})
    set_job(services, job_id, overlap="queue_one")
    lost = insert_execution(services, job_id, status="running", attempt_count=1,
                            attempt_started_at=NOW - timedelta(minutes=5))
    waiting = insert_execution(services, job_id, status="waiting", created_at=NOW - timedelta(seconds=1))
    assert run_maintenance(services, NOW).lost == 1
    assert status_of(services, lost)[0] == "lost" and status_of(services, waiting)[0] == "queued"
    assert score_of(due_index(services), f"e:{waiting}:1") == to_ms(NOW)


# ---------------------------------------------------------------- retention


def test_retention_deletes_old_finished_runs_with_their_attempts_only(services: Services) -> None:
    job_id = later_job(services)
    old = NOW - timedelta(days=31)
    finished = {s: insert_execution(services, job_id, status=s, created_at=old + timedelta(seconds=i))
                for i, s in enumerate(("succeeded", "failed", "skipped", "missed", "lost"))}
    unfinished = [insert_execution(services, job_id, status=s, created_at=old - timedelta(seconds=i))
                  for i, s in enumerate(("queued", "waiting", "running", "retrying"))]
    recent = insert_execution(services, job_id, status="succeeded", created_at=NOW - timedelta(days=29))
    with services.db.connection() as conn:
        conn.execute("INSERT INTO attempts (execution_id, number, started_at, duration_ms) VALUES (%s, 1, %s, 5)",
                     (finished["succeeded"], old))
    assert run_maintenance(services, NOW).pruned == 5
    left = {r[0] for r in executions(services, job_id)}
    assert left == {*unfinished, recent}
    assert attempts(services, finished["succeeded"]) == []


def test_audit_entries_go_after_the_retention_as_runs_do(services: Services) -> None:
    with services.db.connection() as conn:
        tenant_id = create_tenant(conn, "audited")
        for days in (31, 30.5, 29):
            conn.execute("INSERT INTO audit_events (id, tenant_id, at, action, target) VALUES (%s, %s, %s, %s, %s)",
                         (str(uuid.uuid4()), tenant_id, NOW - timedelta(days=days), "secret.put", f"S{days}"))
    assert run_maintenance(services, NOW, clock=SteppingClock(0.001)).audit_events_pruned == 2
    with services.db.connection() as conn:
        assert [r[0] for r in conn.execute("SELECT target FROM audit_events")] == ["S29"]


class SteppingClock:
    """A monotonic clock that moves `step` seconds each time it is read."""

    def __init__(self, step: float) -> None:
        self.step, self.reads = step, 0

    def __call__(self) -> float:
        self.reads += 1
        return self.reads * self.step


def insert_old_runs(svc: Services, job_id: str, count: int, days: int = 40) -> None:
    """`count` succeeded runs of `job_id`, one a second, all older than `days` (one statement)."""
    with svc.db.connection() as conn:
        conn.execute(
            "INSERT INTO executions (id, tenant_id, job_id, scheduled_for, trigger, status, created_at)"
            " SELECT gen_random_uuid(), tenant_id, id, %(at)s - make_interval(secs => n), 'schedule', 'succeeded',"
            "        %(at)s - make_interval(secs => n)"
            "   FROM jobs, generate_series(1, %(count)s) AS n WHERE jobs.id = %(job)s",
            {"at": NOW - timedelta(days=days), "count": count, "job": job_id})


def test_retention_deletes_in_batches_oldest_first_until_the_budget_is_spent(services: Services) -> None:
    job_id = later_job(services)
    insert_old_runs(services, job_id, 5)
    with services.db.connection() as conn:
        spent_after_two = maintenance_store.Budget(until=2, clock=SteppingClock(1))
        assert maintenance_store.prune_executions(conn, NOW - timedelta(days=30), 2, spent_after_two) == 4
    # The newest of the five is left.
    assert [row[1] for row in executions(services, job_id)] == [NOW - timedelta(days=40, seconds=1)]


def test_a_tenant_over_its_history_quota_loses_its_oldest_finished_runs_only(services: Services) -> None:
    with services.db.connection() as conn:
        flooding, quiet = create_tenant(conn, "flooding"), create_tenant(conn, "quiet")
        quotas_store.set_overrides(conn, flooding, {"max_history_rows": 3})
    flood_job, quiet_job = later_job(services, tenant_id=flooding), later_job(services, tenant_id=quiet)
    # insert_execution gives each later run an older slot: the first inserted is the newest.
    newest = [insert_execution(services, flood_job, status="succeeded") for _ in range(2)]
    running = insert_execution(services, flood_job, status="running", attempt_started_at=NOW)
    oldest = [insert_execution(services, flood_job, status=s) for s in ("failed", "missed", "lost", "succeeded")]
    still_retrying = insert_execution(services, flood_job, status="retrying", next_attempt_at=NOW + timedelta(hours=1))
    quiet_runs = {insert_execution(services, quiet_job, status="succeeded") for _ in range(6)}
    with services.db.connection() as conn:
        conn.execute("INSERT INTO attempts (execution_id, number, started_at, duration_ms) VALUES (%s, 1, %s, 5)",
                     (oldest[-1], NOW))

    report = run_maintenance(services, NOW, clock=SteppingClock(0.001))

    # Three newest kept (one of them in progress); older finished runs go, an unfinished one stays.
    assert report.history_pruned == len(oldest) and report.pruned == 0
    assert {r[0] for r in executions(services, flood_job)} == {*newest, running, still_retrying}
    assert attempts(services, oldest[-1]) == []
    # The tenant beside it, under the default quota, keeps everything.
    assert {r[0] for r in executions(services, quiet_job)} == quiet_runs


def test_the_history_quota_prunes_oldest_first_and_stops_with_the_budget(services: Services) -> None:
    job_id = later_job(services)
    with services.db.connection() as conn:
        quotas_store.set_overrides(conn, find_tenant(conn, "t"), {"max_history_rows": 100})
    insert_old_runs(services, job_id, 5 * BATCH + 100, days=1)
    # Read when the pass starts and at least after every batch, half the budget each time: 2 batches at most.
    first = run_maintenance(services, NOW, clock=SteppingClock(RETENTION_UNTIL_SECONDS / 2)).history_pruned
    assert BATCH <= first <= 2 * BATCH
    left = [row[1] for row in executions(services, job_id)]
    assert len(left) == 5 * BATCH + 100 - first and min(left) == NOW - timedelta(days=1, seconds=len(left))
    # The next pass goes on where this one stopped.
    assert run_maintenance(services, NOW, clock=SteppingClock(0.001)).history_pruned == 5 * BATCH - first
    assert len(executions(services, job_id)) == 100


def test_the_history_quota_delete_walks_the_tenant_index_oldest_first(db: Any) -> None:
    params = {"tenant_id": str(uuid.uuid4()), "scheduled_for": NOW, "id": str(uuid.uuid4()), "limit": BATCH}
    with db.transaction():
        db.execute("SET LOCAL enable_seqscan = off")
        db.execute("SET LOCAL enable_bitmapscan = off")
        plan = "\n".join(row[0] for row in db.execute("EXPLAIN " + maintenance_store._PRUNE_HISTORY, params))
    assert "Index Scan Backward using executions_tenant_newest" in plan and "Sort" not in plan, plan


@pytest.mark.parametrize(("sql", "index"), [(maintenance_store._PRUNE, "executions_final_created"),
                                              (notifications_store._PRUNE, "notifications_final_created"),
                                              (idempotency_store._PRUNE, "idempotency_keys_created"),
                                              (audit_store._PRUNE, "audit_events_at")])
def test_each_retention_delete_walks_an_index_oldest_first(db: Any, sql: str, index: str) -> None:
    # Tables here are tiny, so the planner is told to avoid scanning them whole: what is checked is that an
    # index's predicate covers the query and that its order serves ORDER BY without a sort.
    with db.transaction():
        db.execute("SET LOCAL enable_seqscan = off")
        db.execute("SET LOCAL enable_bitmapscan = off")
        plan = "\n".join(row[0] for row in db.execute("EXPLAIN " + sql, {"cutoff": NOW, "limit": BATCH}))
    # A sort of the batch's ids (the planner's way to dedupe `id IN (...)`, chosen on a tiny table's costs)
    # is not one of the ORDER BY: that key is `created_at`.
    sorts = [line for line in plan.splitlines() if "Sort Key:" in line and "created_at" in line]
    assert f"Index Scan using {index}" in plan and not sorts, plan


def test_retention_keeps_up_beyond_the_old_20000_rows_a_pass_within_its_budget(services: Services) -> None:
    job_id = later_job(services)
    insert_old_runs(services, job_id, 25_000)
    # Time barely moves: the pass goes on until nothing old is left (the old pass stopped at 20 x 1,000).
    report = run_maintenance(services, NOW, clock=SteppingClock(0.001))
    assert report.pruned == 25_000 and executions(services, job_id) == []


def test_retention_stops_when_its_budget_is_spent(services: Services) -> None:
    job_id = later_job(services)
    insert_old_runs(services, job_id, 25_000)
    # Every read of the clock spends a quarter of the budget: it is read when the pass starts, then at
    # least after every batch, so at most 4 batches fit.
    report = run_maintenance(services, NOW, clock=SteppingClock(RETENTION_UNTIL_SECONDS / 4))
    assert BATCH <= report.pruned <= 4 * BATCH and report.pruned % BATCH == 0
    assert len(executions(services, job_id)) == 25_000 - report.pruned


# ---------------------------------------------------------------- lock and handler


def test_a_held_maintenance_lock_makes_a_second_pass_do_nothing(services: Services) -> None:
    job_id = later_job(services)
    index = due_index(services)
    index.remove_job(job_id)
    assert index.acquire_maintenance_lock("other", 5_000)
    assert run_maintenance(services, NOW).locked is False
    assert score_of(index, f"j:{job_id}") is None
    assert services.redis.get(index.maintenance_lock_key) == "other"
    assert not index.release_maintenance_lock("not-mine") and index.release_maintenance_lock("other")


def test_the_poller_handler_runs_maintenance_for_a_maintenance_event(services: Services, handler) -> None:
    job_id = later_job(services)
    due_index(services).remove_job(job_id)
    poller = handler("poller")
    result = poller(load_event("poller_maintenance.json"), None)
    assert result["task"] == "maintenance" and result["locked"] and result["indexed"] == 1
    json.dumps(result)
    tick = poller(load_event("poller_tick.json"), None)
    assert "next_tick_at" in tick and "task" not in tick
