"""The quarantine past the planning loop, against real Postgres and Redis at pinned instants
(tickwork.dispatch.quarantine): a slot the batch's one-statement record rejects, one tenant whose admission
fails, a calendar that cannot be read, a malformed one-shot member; and members of kinds this release does not
know, more of them than a batch holds, due before real jobs. Each time the rest of the batch is claimed,
recorded and dispatched in the same tick, and what failed is set aside out of the claimable range."""
from __future__ import annotations

import json
import uuid
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any, Iterator

import pytest
from psycopg.types.json import Jsonb

from tests.conftest import RecordingInvoker
from tests.integration.helpers import due_index, executions, insert_job
from tests.support import mark_built, score_of
from tickwork.dueindex import specs as dueindex_specs
from tickwork.calendars.rules import BOUNDS_KEY, BOUNDS_VERSION
from tickwork.dispatch.calendars import CalendarCache
from tickwork.dispatch.poller import Poller
from tickwork.dueindex.entries import encode_spec, execution_member
from tickwork.schedule import specs as scheduling
from tickwork.store import jobs as jobs_store
from tickwork.store.tenants import create_tenant
from tickwork.timeutil import to_ms
from tickwork.wiring import Services, build_services

T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)
NOW_MS = to_ms(T0) + 50
DAILY = "0 0 12 * * *"  # due at T0, not again within these tests


def poller(svc: Services) -> Poller:
    polling = Poller(svc, plan_seconds=60.0, clock=lambda: 0.0)
    polling.calendars = CalendarCache(lambda: 0.0)
    return polling


def tenant(svc: Services, name: str) -> str:
    with svc.db.connection() as conn:
        return create_tenant(conn, name)


def jobs(svc: Services, tenant_id: str, count: int, next_run_at: datetime = T0, schedule: str = DAILY) -> list[str]:
    return [insert_job(svc, schedule=schedule, next_run_at=next_run_at, tenant_id=tenant_id) for _ in range(count)]


def run_ids(svc: Services, job_ids: list[str]) -> set[str]:
    return {row[0] for job_id in job_ids for row in executions(svc, job_id)}


def failures(svc: Services, member: str) -> int | None:
    shard = svc.index.shard_of_member(member)
    raw = svc.redis.hget(shard.failures_key, member)
    return None if raw is None else int(raw)


def test_a_slot_the_record_rejects_is_found_by_splitting_the_write_and_the_rest_is_recorded(
    services: Services, invoker: RecordingInvoker,
) -> None:
    a, b = tenant(services, "a"), tenant(services, "b")
    good = jobs(services, a, 20) + jobs(services, b, 20)
    bad = insert_job(services, schedule=DAILY, next_run_at=T0, tenant_id=a)
    shard = services.index.shard_of_job(bad)
    with services.db.connection() as conn:
        spec = {**scheduling.job_spec(jobs_store.get_jobs(conn, [bad])[0]), "v": 2 ** 31}
    services.redis.hset(shard.specs_key, bad, encode_spec(spec))  # a version the insert's int[] refuses
    mark_built(due_index(services), to_ms(T0))

    result = poller(services).tick(NOW_MS)

    assert result.quarantined == 1 and result.dispatched == 40
    assert {d.execution_id for d in invoker.dispatches} == run_ids(services, good)
    assert executions(services, bad) == []
    assert 2 <= result.postgres_round_trips <= 2 * 6 + 1  # the split: about 2 log2(41) statements, not 41
    with services.db.connection() as conn:
        row = conn.execute("SELECT error_reason, error_count FROM jobs WHERE id = %s", (bad,)).fetchone()
    assert row == ("NumericValueOutOfRange while recording its slot", 1)
    # Its claim had moved it to its next slot (tomorrow); it is put back within 5 s instead, out of reach till then.
    assert score_of(services.index, f"j:{bad}") == NOW_MS + 5_000


def test_one_tenants_failing_admission_holds_back_its_runs_only(
    services: Services, invoker: RecordingInvoker,
) -> None:
    a, b = tenant(services, "a"), tenant(services, "b")
    a_jobs, b_jobs = jobs(services, a, 3), jobs(services, b, 3)
    services.redis.set(services.in_flight.key(a), "not a sorted set")  # its runs-in-flight set is broken
    mark_built(due_index(services), to_ms(T0))

    result = poller(services).tick(NOW_MS)

    assert {d.execution_id for d in invoker.dispatches} == run_ids(services, b_jobs)
    assert result.quarantined == 3 and result.dispatched == 3
    held = sorted(run_ids(services, a_jobs))
    assert len(held) == 3  # recorded, each waiting for its dispatch
    for run_id in held:
        member = execution_member(run_id, 1)
        assert score_of(services.index, member) == NOW_MS + 5_000 and failures(services, member) == 1

    services.redis.delete(services.in_flight.key(a))  # mended: at their retry they go out, as one-shots
    later = poller(services).tick(NOW_MS + 5_000)
    assert later.quarantined == 0 and sorted(d.execution_id for d in invoker.dispatches[3:]) == held
    assert all(failures(services, execution_member(run_id, 1)) is None for run_id in held)


def test_a_calendar_that_cannot_be_read_sets_aside_only_the_jobs_naming_it(
    services: Services, invoker: RecordingInvoker,
) -> None:
    a = tenant(services, "a")
    with services.db.connection() as conn:
        # A row corrupted after it was written within bounds: its event has no first day.
        broken = {BOUNDS_KEY: BOUNDS_VERSION, "dates": [], "events": [{"days": 1}]}
        for name, compiled in (("broken", broken), ("fine", {"dates": ["2031-01-01"]})):
            conn.execute("INSERT INTO calendars (tenant_id, name, dates, compiled) VALUES (%s, %s, '{}', %s)",
                         (a, name, Jsonb(compiled)))
    named = {"broken": jobs(services, a, 2), "fine": jobs(services, a, 2), "": jobs(services, a, 2)}
    with services.db.connection() as conn:
        for name, ids in named.items():
            if name:
                conn.execute("UPDATE jobs SET calendar = %s WHERE id = ANY(%s::uuid[])",
                             (Jsonb({"exclude": [name]}), ids))
        for job in jobs_store.get_jobs(conn, [i for ids in named.values() for i in ids]):
            dueindex_specs.index_job(due_index(services), job)
    garbled = named[""][0]  # its spec in the index names calendars in a shape the API never writes
    shard = services.index.shard_of_job(garbled)
    spec = {**json.loads(services.redis.hget(shard.specs_key, garbled)), "c": ["fine"]}
    services.redis.hset(shard.specs_key, garbled, encode_spec(spec))
    mark_built(due_index(services), to_ms(T0))

    result = poller(services).tick(NOW_MS)

    assert result.quarantined == 3
    assert {d.execution_id for d in invoker.dispatches} == run_ids(services, named["fine"] + named[""][1:])
    with services.db.connection() as conn:
        reasons = conn.execute("SELECT DISTINCT error_reason FROM jobs WHERE id = ANY(%s::uuid[])",
                               (named["broken"],)).fetchall()
    assert reasons == [("KeyError while reading a calendar it excludes by",)]


def test_a_malformed_one_shot_member_is_set_aside_with_a_growing_backoff(
    services: Services, invoker: RecordingInvoker,
) -> None:
    job_ids = jobs(services, tenant(services, "a"), 3, schedule="* * * * * *")
    member = "e:run-1:notanumber"
    services.redis.zadd(services.index.shard_of_member(member).due_key, {member: to_ms(T0) - 1})
    mark_built(due_index(services), to_ms(T0))

    result = poller(services).tick(NOW_MS)
    assert result.quarantined == 1 and result.dispatched >= 3
    assert {d.fire_at_ms for d in invoker.dispatches if d.execution_id in run_ids(services, job_ids)} >= {to_ms(T0)}
    assert score_of(services.index, member) == NOW_MS + 5_000 and failures(services, member) == 1
    assert poller(services).tick(NOW_MS + 5_000).quarantined == 1
    assert score_of(services.index, member) == NOW_MS + 15_000 and failures(services, member) == 2


@pytest.fixture
def small(services: Services, invoker: RecordingInvoker) -> Iterator[Services]:
    """Batches of 10: 25 members of unknown kinds fill more than two."""
    svc = build_services(replace(services.settings, batch_size=10), invoker=invoker)
    try:
        yield svc
    finally:
        svc.close()


@pytest.mark.parametrize("late", [timedelta(0), timedelta(seconds=30)], ids=["on time", "backlog"])
def test_members_of_unknown_kinds_are_left_alone_and_never_hide_what_is_due_behind_them(
    small: Services, invoker: RecordingInvoker, late: timedelta,
) -> None:
    job_id = insert_job(small, schedule=DAILY, next_run_at=T0, tenant_id=tenant(small, "a"))
    shard = small.index.shard_of_job(job_id)
    # Shaped as a one-shot is (this release's predecessor dispatched, and so consumed, any such member), all
    # due before the job.
    newer = {f"q:{uuid.uuid4()}:1": to_ms(T0) - 1 - n % 3 for n in range(25)}
    small.redis.zadd(shard.due_key, newer)
    mark_built(due_index(small), to_ms(T0))

    result = poller(small).tick(NOW_MS + int(late.total_seconds() * 1000))

    assert result.dispatched == 1 and [d.fire_at_ms for d in invoker.dispatches] == [to_ms(T0)]
    assert result.quarantined == 0
    assert {m: score_of(small.index, m) for m in newer} == newer  # not claimed, not moved, not removed
    assert not small.redis.exists(shard.failures_key)
