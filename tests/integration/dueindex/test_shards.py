"""The sharded due index against the real Redis and Postgres: claims, races, a shard count changed
across a deploy, and one shard losing its data. Each holds the same guarantees as one shard: no
schedule lost, one run per (job, slot)."""
from __future__ import annotations

import threading
from collections import Counter
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Callable, Iterator

import pytest

from tests.conftest import RecordingInvoker
from tests.integration.helpers import due_index, insert_job
from tests.support import mark_built, score_of
from tickwork.dispatch.poller import Poller, TickResult
from tickwork.dueindex.shards import shard_of
from tickwork.timeutil import to_ms
from tickwork.wiring import Services, build_services

T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)
EVERY_SECOND = "* * * * * *"


@pytest.fixture
def sharded(services: Services, invoker: RecordingInvoker) -> Iterator[Callable[[int], Services]]:
    """Services of the test's deployment with another shard count (and no lookahead: a tick at a whole
    second claims exactly that second's slots), all dispatching to the test's invoker."""
    built: list[Services] = []

    def build(shards: int) -> Services:
        # The recording invoker runs nothing, so runs stay in flight: a budget past every test's runs.
        built.append(build_services(replace(services.settings, due_index_shards=shards, lookahead_ms=0,
                                            max_runs_in_flight=100_000), invoker=invoker))
        return built[-1]

    yield build
    for svc in built:
        svc.close()


def _jobs(svc: Services, count: int, schedule: str = EVERY_SECOND) -> list[str]:
    """Jobs indexed in an index already laid out for this deployment's shard count."""
    job_ids = [insert_job(svc, schedule=schedule, next_run_at=T0) for _ in range(count)]
    mark_built(due_index(svc), to_ms(T0))
    due_index(svc).store_layout()
    return job_ids


def _tick(svc: Services, second: int) -> TickResult:
    return Poller(svc).tick(to_ms(T0 + timedelta(seconds=second)))


def _slots(svc: Services) -> Counter[tuple[str, datetime, str]]:
    with svc.db.connection() as conn:
        rows = conn.execute("SELECT job_id::text, scheduled_for, status FROM executions").fetchall()
    return Counter((job_id, at, status) for job_id, at, status in rows)


def _assert_each_slot_ran_once(svc: Services, invoker: RecordingInvoker, job_ids: list[str], seconds: int) -> None:
    expected = {(job_id, T0 + timedelta(seconds=s), "queued") for job_id in job_ids for s in range(seconds)}
    slots = _slots(svc)
    assert set(slots) == expected  # nothing lost, nothing recorded missed
    assert max(slots.values()) == 1
    assert len(invoker.dispatches) == len({d.execution_id for d in invoker.dispatches}) == len(expected)


def test_jobs_spread_over_the_shards_and_one_tick_claims_them_all(
    sharded: Callable[[int], Services], invoker: RecordingInvoker,
) -> None:
    svc = sharded(3)
    job_ids = _jobs(svc, 300)
    index = due_index(svc)
    per_shard = [svc.redis.zcard(shard.due_key) for shard in index.shards]
    assert per_shard == [sum(shard_of(j, 3) == n for j in job_ids) for n in range(3)] and min(per_shard) > 50
    result = _tick(svc, 0)
    assert result.dispatched == 300 and result.batches == 3
    # lock + per shard (fetch, claim, runs in flight, final fetch) + unlock: one shard's round trips, three
    # times over.
    assert result.redis_round_trips == 1 + 3 * 4 + 1
    assert all(score_of(index, f"j:{j}") == to_ms(T0) + 1000 for j in job_ids)
    _assert_each_slot_ran_once(svc, invoker, job_ids, 1)


def test_two_sharded_pollers_at_once_dispatch_each_slot_exactly_once(
    sharded: Callable[[int], Services], invoker: RecordingInvoker,
) -> None:
    """Both skip the tick lock and race on the same 900 due jobs over 3 shards."""
    first = sharded(3)
    pollers = [Poller(first), Poller(sharded(3))]
    job_ids = _jobs(first, 900)
    barrier = threading.Barrier(2)

    def run(poller: Poller) -> None:
        barrier.wait()
        poller._drain(to_ms(T0), TickResult(locked=True))

    threads = [threading.Thread(target=run, args=(p,)) for p in pollers]
    [t.start() for t in threads]
    [t.join() for t in threads]
    _assert_each_slot_ran_once(first, invoker, job_ids, 1)


def test_a_shard_count_changed_across_a_deploy_loses_and_doubles_no_slot(
    sharded: Callable[[int], Services], invoker: RecordingInvoker,
) -> None:
    """1 shard, then 3, with the old poller still ticking beside the new one for a second (a deploy
    rolling out), then 2: every job runs every second exactly once."""
    one, three, two = sharded(1), sharded(3), sharded(2)
    job_ids = _jobs(one, 200)
    retry_id = insert_job(one, schedule="0 0 0 1 1 *", next_run_at=T0 + timedelta(days=30))
    with one.db.connection() as conn:
        conn.execute("INSERT INTO executions (id, tenant_id, job_id, scheduled_for, trigger, status, attempt_count)"
                     " SELECT gen_random_uuid(), tenant_id, id, %s, 'schedule', 'retrying', 1 FROM jobs WHERE id = %s"
                     " RETURNING id::text", (T0, retry_id))
        execution_id = conn.execute("SELECT id::text FROM executions WHERE job_id = %s", (retry_id,)).fetchone()[0]
    due_index(one).schedule_execution(execution_id, 2, to_ms(T0 + timedelta(seconds=2)))
    assert _tick(one, 0).dispatched == 200 and _tick(one, 1).dispatched == 200

    moved = _tick(three, 2)
    assert moved.relayout_from == 1 and moved.rebuilt
    assert one.redis.exists(due_index(one).due_key) == 0  # the old layout is gone
    assert [d for d in invoker.dispatches if d.execution_id == execution_id] == [
        type(invoker.dispatches[0])(execution_id, 2, to_ms(T0 + timedelta(seconds=2)))]  # carried over

    old, new = Poller(one), Poller(three)  # the old version's poller has not stopped yet
    barrier = threading.Barrier(2)

    def run(poller: Poller) -> None:
        barrier.wait()
        poller._drain(to_ms(T0 + timedelta(seconds=3)), TickResult(locked=True))

    threads = [threading.Thread(target=run, args=(p,)) for p in (old, new)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert _tick(three, 4).dispatched == 200

    assert _tick(two, 5).relayout_from == 3
    assert _tick(two, 6).relayout_from is None
    assert svc_layout(two) == "2"
    slots = _slots(one)
    del slots[(retry_id, T0, "retrying")]
    assert set(slots) == {(j, T0 + timedelta(seconds=s), "queued") for j in job_ids for s in range(7)}
    assert max(slots.values()) == 1
    assert len({d.execution_id for d in invoker.dispatches}) == len(invoker.dispatches) == 200 * 7 + 1


def svc_layout(svc: Services) -> str | None:
    return svc.redis.get(due_index(svc).layout_key)


def test_going_back_to_one_shard_leaves_exactly_the_keys_of_an_unsharded_index(
    sharded: Callable[[int], Services], invoker: RecordingInvoker,
) -> None:
    three, one = sharded(3), sharded(1)
    job_ids = _jobs(three, 30)
    _tick(three, 0)
    assert svc_layout(three) == "3"
    _tick(one, 1)
    assert svc_layout(one) is None
    _tick(three, 2)
    assert svc_layout(three) == "3"
    _tick(one, 3)
    namespace = one.settings.namespace
    keys = set(one.redis.scan_iter(match="{" + namespace + "[}/]*"))
    in_flight = {key for key in keys if key.startswith("{" + namespace + "}:inflight:")}  # per tenant, not shard
    assert len(in_flight) == 1
    assert keys - in_flight == {"{" + namespace + "}:" + name for name in ("due", "specs", "index-built", "last-tick")}
    _assert_each_slot_ran_once(one, invoker, job_ids, 4)


def test_one_shard_losing_its_data_is_rebuilt_alone_and_no_run_is_lost_or_doubled(
    sharded: Callable[[int], Services], invoker: RecordingInvoker,
) -> None:
    svc = sharded(3)
    job_ids = _jobs(svc, 300)
    assert _tick(svc, 0).dispatched == 300
    index = due_index(svc)
    lost = index.shards[1]
    svc.redis.delete(*lost.keys())  # a failover of that shard's primary to an empty replica
    others = {m: s for shard in (index.shards[0], index.shards[2])
              for m, s in svc.redis.zrange(shard.due_key, 0, -1, withscores=True)}

    result = _tick(svc, 1)
    assert result.rebuilt and result.reindexed == sum(shard_of(j, 3) == 1 for j in job_ids)
    assert result.dispatched == 300 and index.is_built()
    assert all(score == to_ms(T0) + 1000 for score in others.values())  # the others were claimed, not rebuilt
    assert _tick(svc, 2).dispatched == 300
    _assert_each_slot_ran_once(svc, invoker, job_ids, 3)
