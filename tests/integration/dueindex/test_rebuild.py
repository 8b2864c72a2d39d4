"""Rebuilding the due index after Redis lost it: complete, bounded per tick, resumable, and safe against
the API, the poller and a second loss working at the same time. Real Postgres and Redis; every clock
the code reads is pinned (ticks at T0-relative times, a fake monotonic clock for the time budget)."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

import pytest

from tests.integration.helpers import due_index, executions, insert_job
from tests.support import mark_built, score_of
from tickwork.dispatch.poller import Poller
from tickwork.dueindex import reconcile
from tickwork.dueindex.entries import Claim, encode_spec
from tickwork.dueindex.index import DueIndex
from tickwork.dueindex.reconcile import StepLimits, rebuild_step
from tickwork.ops.maintenance import run_maintenance
from tickwork.schedule import specs as scheduling
from tickwork.scope import Scope
from tickwork.store import jobs as jobs_store
from tickwork.store.tenants import create_tenant
from tickwork.tenant import jobs as job_service
from tickwork.timeutil import to_ms
from tickwork.wiring import Services

T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)
HOUR = timedelta(hours=1)
DAILY = "0 0 0 * * *"
# A zero budget: each step applies exactly one page, so a test decides how far every tick gets.
ONE_PAGE_OF_TWO = StepLimits(seconds=0, page=2)


class FakeMonotonic:
    """A monotonic clock that moves on by `step` seconds each time it is read."""

    def __init__(self, step: float) -> None:
        self.step, self.now = step, 0.0

    def __call__(self) -> float:
        reading, self.now = self.now, self.now + self.step
        return reading


def unindexed_jobs(svc: Services, count: int, *, schedule: str = DAILY, next_run_at: datetime = T0 + HOUR,
                   tenant_id: str | None = None) -> list[str]:
    """Active jobs in Postgres that Redis lost, in the order a rebuild walks them (by id)."""
    return sorted(insert_job(svc, schedule=schedule, next_run_at=next_run_at, tenant_id=tenant_id, index=False)
                  for _ in range(count))


def indexed(index: DueIndex) -> list[str]:
    return sorted(job_id for batch in index.job_ids() for job_id in batch)


def set_job(svc: Services, job_id: str, **columns: Any) -> None:
    assignments = ", ".join(f"{name} = %s" for name in columns)
    with svc.db.connection() as conn:
        conn.execute(f"UPDATE jobs SET {assignments} WHERE id = %s", (*columns.values(), job_id))


def stored(svc: Services, job_id: str) -> Any:
    with svc.db.connection() as conn:
        return jobs_store.get_jobs(conn, [job_id])[0]


def tenant(svc: Services) -> str:
    with svc.db.connection() as conn:
        return create_tenant(conn, "t")


def api(svc: Services, tenant_id: str, now: datetime = T0) -> Scope:
    return Scope(db=svc.db, index=due_index(svc), settings=svc.settings, tenant_id=tenant_id, now=now,
                             keyring=svc.keyring)


def after_first_call(monkeypatch: pytest.MonkeyPatch, name: str, then: Callable[[], Any]) -> None:
    """Run `then` right after the first call of the store read `name` returns: what another process
    did between a rebuild's read of Postgres and its write to Redis."""
    real = getattr(reconcile.maintenance_store, name)
    pending = [then]

    def read(*args: Any, **kwargs: Any) -> Any:
        rows = real(*args, **kwargs)
        if pending:
            pending.pop()()
        return rows

    monkeypatch.setattr(reconcile.maintenance_store, name, read)


def rebuild_until_whole(svc: Services, limits: StepLimits = ONE_PAGE_OF_TWO, steps: int = 20) -> int:
    """Steps until the index is whole; returns how many it took."""
    index = due_index(svc)
    for taken in range(1, steps + 1):
        with svc.db.connection() as conn:
            if rebuild_step(conn, index, T0, limits).complete:
                return taken
    raise AssertionError(f"index not whole after {steps} steps")


# ---------------------------------------------------------------- what a rebuild produces


def test_a_rebuild_indexes_every_active_job_at_its_postgres_next_run_at_with_its_spec(services: Services) -> None:
    plain = insert_job(services, schedule="*/15 * * * *", next_run_at=T0 + HOUR, index=False)
    set_job(services, plain, next_run_at=T0 + HOUR + timedelta(microseconds=1999))  # scored to the ms below
    zoned = insert_job(services, schedule="0 30 9 * * MON-FRI", next_run_at=T0 + 2 * HOUR, index=False)
    set_job(services, zoned, timezone="Europe/Berlin", catchup="all", catchup_window_seconds=42, version=3)
    rates = [insert_job(services, schedule="rate(90 seconds)", next_run_at=T0 + HOUR, index=False) for _ in range(2)]
    set_job(services, rates[1], created_at=T0 - timedelta(seconds=7))  # its own anchor: its own spec
    windowed = insert_job(services, schedule="rate(5 minutes)", next_run_at=T0 + HOUR, index=False)
    set_job(services, windowed, start_at=T0 - HOUR, end_at=T0 + 48 * HOUR)
    unslotted = insert_job(services, schedule="0 0 13 * * *", next_run_at=T0, index=False)
    set_job(services, unslotted, next_run_at=None)  # active without a slot: gets its first after now
    broken = insert_job(services, schedule="* * * * *", next_run_at=T0 + HOUR, index=False)
    set_job(services, broken, schedule="not a schedule")
    gone = [insert_job(services, schedule="* * * * *", next_run_at=T0 + HOUR) for _ in range(3)]  # indexed
    for job_id, status in zip(gone, ("paused", "completed", "deleted")):
        set_job(services, job_id, status=status)  # its index write failed: a dead member
    index = due_index(services)
    index.schedule_execution("11111111-1111-1111-1111-111111111111", 2, to_ms(T0 + HOUR))  # a pending retry

    with services.db.connection() as conn:
        result = rebuild_step(conn, index, T0, StepLimits(seconds=60))

    live = [plain, zoned, *rates, windowed, unslotted]
    assert result.complete and index.is_built() and result.unparsable == 1 and result.removed == 3
    assert indexed(index) == sorted(live)
    assert sorted(services.redis.hkeys(index.specs_key)) == sorted(live)
    for job_id in live:
        job = stored(services, job_id)
        expected = job.next_run_at or T0.replace(hour=13)
        assert score_of(index, f"j:{job_id}") == to_ms(expected), job_id
        assert services.redis.hget(index.specs_key, job_id) == encode_spec(scheduling.job_spec(job)), job_id
    assert json.loads(services.redis.hget(index.specs_key, rates[0])) != json.loads(
        services.redis.hget(index.specs_key, rates[1]))
    assert score_of(index, "e:11111111-1111-1111-1111-111111111111:2") == to_ms(T0 + HOUR)


# ---------------------------------------------------------------- bounded per tick, resumed across ticks


def test_each_tick_rebuilds_one_budget_worth_and_only_the_last_step_marks_the_index_whole(
    services: Services, invoker: Any,
) -> None:
    ids = unindexed_jobs(services, 5)
    poller, index = Poller(services, rebuild=ONE_PAGE_OF_TWO), due_index(services)
    progress = []
    for _ in range(4):
        result = poller.tick(to_ms(T0))
        progress.append((result.rebuilt, result.reindexed, indexed(index), index.is_built()))
    # Pages of two jobs by id (the last one short), then a step that marks the index whole.
    assert progress == [(True, 2, ids[:2], False), (True, 2, ids[:4], False), (True, 1, ids, False),
                        (True, 0, ids, True)]
    assert not poller.tick(to_ms(T0)).rebuilt
    assert services.redis.exists(index.rebuild_key) == 0


def test_a_rebuild_step_stops_at_the_first_page_past_its_time_budget(services: Services) -> None:
    ids = unindexed_jobs(services, 5)
    index = due_index(services)
    limits = StepLimits(seconds=0.5, page=1, clock=FakeMonotonic(step=0.3))
    with services.db.connection() as conn:
        first = rebuild_step(conn, index, T0, limits)  # clock read at 0, after page 1 at 0.3, page 2 at 0.6
        assert (first.indexed, first.complete, indexed(index)) == (2, False, ids[:2])
        second = rebuild_step(conn, index, T0, limits)  # goes on from the third job
    assert (second.indexed, indexed(index)) == (2, ids[:4])


def test_ticks_mid_rebuild_dispatch_what_is_indexed_and_every_due_slot_runs_once(
    services: Services, invoker: Any,
) -> None:
    """The job the API indexed fires in the first tick, with the first page's job; each later tick
    reaches one more job by id, whose T0 slot then fires late (inside its catch-up window), once."""
    rebuilt = unindexed_jobs(services, 3, schedule="* * * * *", next_run_at=T0)
    written_by_api = insert_job(services, schedule="* * * * *", next_run_at=T0)
    walk = sorted([*rebuilt, written_by_api])  # the rebuild walks the API's job too, and leaves it be
    poller = Poller(services, rebuild=StepLimits(seconds=0, page=1))
    fired = []
    for second in range(6):
        poller.tick(to_ms(T0) + 1000 * second)
        fired.append(len({d.execution_id for d in invoker.dispatches}))
    assert fired == [len({written_by_api, *walk[:ticks]}) for ticks in range(1, 7)]
    assert due_index(services).is_built()
    for job_id in [*rebuilt, written_by_api]:
        assert [(r[1], r[2]) for r in executions(services, job_id)] == [(T0, "queued")]
        assert score_of(due_index(services), f"j:{job_id}") == to_ms(T0 + timedelta(minutes=1))


# ---------------------------------------------------------------- races


def test_jobs_paused_or_deleted_between_a_pages_read_and_write_are_out_once_the_index_is_whole(
    services: Services, invoker: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    owner = tenant(services)
    paused, deleted, kept = unindexed_jobs(services, 3, next_run_at=T0 + HOUR, tenant_id=owner)
    scope = api(services, owner)
    after_first_call(monkeypatch, "index_page",
                     lambda: (job_service.pause_job(scope, paused), job_service.delete_job(scope, deleted)))
    rebuild_until_whole(services, StepLimits(seconds=0, page=10))
    index = due_index(services)
    assert indexed(index) == [kept] and services.redis.hkeys(index.specs_key) == [kept]
    Poller(services).tick(to_ms(T0 + HOUR))
    assert [d.fire_at_ms for d in invoker.dispatches] == [to_ms(T0 + HOUR)]
    assert executions(services, paused) == [] and executions(services, deleted) == []


def test_a_job_the_api_changed_while_its_page_was_written_keeps_the_api_score_and_spec(
    services: Services, monkeypatch: pytest.MonkeyPatch,
) -> None:
    owner = tenant(services)
    (job_id,) = unindexed_jobs(services, 1, tenant_id=owner)
    after_first_call(monkeypatch, "index_page",
                     lambda: job_service.update_job(api(services, owner), job_id, {"schedule": "30 * * * *"}))
    rebuild_until_whole(services)
    index = due_index(services)
    assert score_of(index, f"j:{job_id}") == to_ms(T0 + timedelta(minutes=30))
    assert json.loads(services.redis.hget(index.specs_key, job_id))["v"] == 2
    assert services.redis.hget(index.specs_key, job_id) == encode_spec(scheduling.job_spec(stored(services, job_id)))


def test_a_job_resumed_while_the_rebuild_takes_it_out_as_stopped_is_back_at_its_postgres_slot(
    services: Services, monkeypatch: pytest.MonkeyPatch,
) -> None:
    owner = tenant(services)
    job_id = insert_job(services, schedule="* * * * *", next_run_at=T0 + HOUR, tenant_id=owner)
    set_job(services, job_id, status="paused", next_run_at=None)  # paused; its index write failed
    resumed_at = T0 + timedelta(seconds=30)
    after_first_call(monkeypatch, "not_active_between",
                     lambda: job_service.resume_job(api(services, owner, resumed_at), job_id))
    rebuild_until_whole(services, StepLimits(seconds=0, page=10))
    index = due_index(services)
    assert score_of(index, f"j:{job_id}") == to_ms(T0 + timedelta(minutes=1)) == to_ms(stored(services, job_id).next_run_at)
    assert services.redis.hget(index.specs_key, job_id) == encode_spec(scheduling.job_spec(stored(services, job_id)))


def test_a_claim_made_after_a_page_was_read_keeps_its_score(
    services: Services, invoker: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The poller claims a job the API had indexed while the rebuild's page still holds its old
    next_run_at (the claim's Postgres write is in flight): the rebuild must not move the score back."""
    job_id = insert_job(services, schedule="* * * * *", next_run_at=T0)
    index = due_index(services)
    after_first_call(monkeypatch, "index_page",
                     lambda: index.claim([Claim(f"j:{job_id}", to_ms(T0), to_ms(T0) + 60_000)]))
    rebuild_until_whole(services)
    assert score_of(index, f"j:{job_id}") == to_ms(T0) + 60_000
    assert Poller(services).tick(to_ms(T0) + 100).dispatched == 0


def test_a_flush_mid_rebuild_starts_it_over_and_never_marks_a_partial_index_whole(
    services: Services, monkeypatch: pytest.MonkeyPatch,
) -> None:
    ids = unindexed_jobs(services, 4)
    index = due_index(services)
    with services.db.connection() as conn:
        rebuild_step(conn, index, T0, ONE_PAGE_OF_TWO)
        assert indexed(index) == ids[:2]

        def flush() -> None:
            keys = list(services.redis.scan_iter(match="{" + services.settings.namespace + "}:*"))
            services.redis.delete(*keys)

        after_first_call(monkeypatch, "index_page", flush)  # Redis loses everything after page 2 is read
        refused = rebuild_step(conn, index, T0, StepLimits(seconds=60, page=2))
    assert (refused.indexed, refused.complete, indexed(index), index.is_built()) == (0, False, [], False)
    # From the first job again: two full pages, an empty one that ends the jobs, then the marker.
    assert rebuild_until_whole(services) == 4
    assert indexed(index) == ids


def test_two_rebuilders_never_both_apply_a_page(services: Services, monkeypatch: pytest.MonkeyPatch) -> None:
    """A maintenance pass and a tick rebuilding at once: whoever writes second finds the position moved
    and stops; the other's progress stands."""
    ids = unindexed_jobs(services, 4)
    index = due_index(services)

    def other_rebuilder() -> None:
        with services.db.connection() as conn:
            rebuild_step(conn, index, T0, ONE_PAGE_OF_TWO)

    after_first_call(monkeypatch, "index_page", other_rebuilder)
    with services.db.connection() as conn:
        stopped = rebuild_step(conn, index, T0, StepLimits(seconds=60, page=2))
    assert (stopped.indexed, indexed(index)) == (0, ids[:2])
    assert services.redis.get(index.rebuild_key) == f"jobs:{ids[1]}"


def test_maintenance_finishes_a_rebuild_the_ticks_began_then_compares_job_by_job(
    services: Services, invoker: Any,
) -> None:
    ids = unindexed_jobs(services, 3)
    Poller(services, rebuild=StepLimits(seconds=0, page=1)).tick(to_ms(T0))
    index = due_index(services)
    assert indexed(index) == ids[:1]
    report = run_maintenance(services, T0)
    assert report.indexed == 2 and index.is_built() and indexed(index) == ids


def test_the_periodic_pass_never_writes_a_spec_older_than_an_api_change_made_while_it_ran(
    services: Services, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The pass read the job from Postgres, then the API changed its schedule (Postgres, then Redis),
    then the pass compared: the index holds the newer spec, which must stay."""
    owner = tenant(services)
    job_id = insert_job(services, schedule=DAILY, next_run_at=T0 + HOUR, tenant_id=owner)
    index = due_index(services)
    mark_built(index, to_ms(T0))
    real = reconcile.maintenance_store.index_pages

    def pages(*args: Any) -> Any:
        for rows in real(*args):
            job_service.update_job(api(services, owner), job_id, {"schedule": "30 * * * *"})
            yield rows

    monkeypatch.setattr(reconcile.maintenance_store, "index_pages", pages)
    with services.db.connection() as conn:
        result = reconcile.reconcile_index(conn, index, T0)
    assert result.indexed == 0
    assert services.redis.hget(index.specs_key, job_id) == encode_spec(scheduling.job_spec(stored(services, job_id)))
    assert json.loads(services.redis.hget(index.specs_key, job_id))["v"] == 2
