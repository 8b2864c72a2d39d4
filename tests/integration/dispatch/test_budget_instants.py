"""The runs-in-flight budget and one instant's runs, against real Postgres and Redis on a pinned clock: a
tenant's top of the hour (up to max_jobs runs at one instant, default quotas) is handed over whole ahead of
its instant, while a tenant whose runs hang is still held to its budget across instants."""
from __future__ import annotations

import json
import threading
import uuid
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

from tests.integration.dispatch.test_budget import tenant
from tests.integration.helpers import insert_job
from tests.support import mark_built, score_of, wait_for
from tickwork.dispatch.poller import TICK_OFFSET_MS, Poller
from tickwork.dueindex.entries import execution_member
from tickwork.dueindex.inflight import Seat
from tickwork.dueindex.reconcile import index_jobs
from tickwork.models import Dispatch
from tickwork.runs import executor
from tickwork.settings import DEFAULT_MAX_JOBS
from tickwork.store.tenants import create_tenant
from tickwork.timeutil import to_ms
from tickwork.wiring import Services

T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)
DAILY = "0 0 12 * * *"  # fires at T0 and not again within these tests
EVERY_SECOND = "* * * * * *"


def bulk_jobs(svc: Services, tenant_id: str, count: int, schedule: str, first: datetime, url: str) -> list[str]:
    """`count` jobs written in one statement and indexed as a rebuild indexes them: a tenant at its max_jobs."""
    ids = [str(uuid.uuid4()) for _ in range(count)]
    request = json.dumps({"method": "POST", "url": url, "headers": {}, "body": None, "timeout_seconds": 5})
    retry = json.dumps({"strategy": "fixed", "max_attempts": 1, "delay_seconds": 1})
    with svc.db.connection() as conn:
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO jobs (id, tenant_id, name, schedule, timezone, request, retry, status, next_run_at)"
                " VALUES (%s, %s, %s, %s, 'UTC', %s, %s, 'active', %s)",
                [(job_id, tenant_id, f"job-{i}", schedule, request, retry, first) for i, job_id in enumerate(ids)])
        index_jobs(conn, svc.index, ids, first - timedelta(minutes=1))
    mark_built(svc.index, to_ms(first) - 60_000)
    return ids


def ticks_until(svc: Services, instant: datetime, seconds_before: int) -> list[tuple[int, Any]]:
    """The poller ticking at each tick point (half past a second) from `seconds_before` the instant up to the
    last one before it; each tick's `now` (ms) with its result."""
    results = []
    for ahead in range(seconds_before, 0, -1):
        now_ms = to_ms(instant) - ahead * 1000 + TICK_OFFSET_MS
        results.append((now_ms, Poller(svc).tick(now_ms)))
    return results


def test_a_tenant_alone_at_its_max_jobs_at_one_instant_is_handed_over_whole_before_it(
    services: Services, invoker: Any,
) -> None:
    """Default quotas (max_runs_in_flight 500, max_jobs 1,000): every one of the tenant's 1,000 runs at T0 is
    handed to an executor in the ticks before T0, none held back. Before, 500 went ahead and the rest waited
    for those 500 to end, after the instant."""
    assert services.settings.max_runs_in_flight < DEFAULT_MAX_JOBS == services.settings.max_jobs
    with services.db.connection() as conn:
        tenant_id = create_tenant(conn, "alone")
    bulk_jobs(services, tenant_id, DEFAULT_MAX_JOBS, DAILY, T0, "http://127.0.0.1:9/hook")

    ticks = ticks_until(services, T0, seconds_before=12)

    assert sum(result.delayed for _, result in ticks) == 0
    assert len(invoker.dispatches) == DEFAULT_MAX_JOBS
    assert len({d.execution_id for d in invoker.dispatches}) == DEFAULT_MAX_JOBS
    assert {d.fire_at_ms for d in invoker.dispatches} == {to_ms(T0)}
    assert all(d.tenant_id == tenant_id for d in invoker.dispatches)
    with services.db.connection() as conn:
        rows = conn.execute("SELECT status, last_error, count(*) FROM executions GROUP BY 1, 2").fetchall()
    assert rows == [("queued", None, DEFAULT_MAX_JOBS)]
    # The places are taken all the same: the executors give them back as the attempts are written.
    assert services.redis.zcard(services.in_flight.key(tenant_id)) == DEFAULT_MAX_JOBS


def fire_ats(invoker: Any, tenant_id: str) -> list[int]:
    return sorted(d.fire_at_ms for d in invoker.dispatches if d.tenant_id == tenant_id)


def test_a_tenant_whose_runs_hang_is_held_to_its_budget_across_instants(
    services: Services, invoker: Any, target: Any,
) -> None:
    """Tenant A (max_runs_in_flight 3) has 4 every-second jobs whose target does not answer; tenant B 2 to a
    target that does. A's 4 runs of T0 go out together (one instant), but while they hang none of A's later
    runs does, however many seconds pass; B's all go out. Once A's runs end, its next runs go out."""
    a, b = tenant(services, "a", max_runs_in_flight=3), tenant(services, "b")
    hang = threading.Event()
    target.gates["/a"] = hang
    for _ in range(4):
        insert_job(services, schedule=EVERY_SECOND, next_run_at=T0, tenant_id=a, url=f"{target.url}/a",
                   retry={"strategy": "fixed", "max_attempts": 1, "delay_seconds": 1}, timeout_seconds=30)
    for _ in range(2):
        insert_job(services, schedule=EVERY_SECOND, next_run_at=T0, tenant_id=b, url=f"{target.url}/b")

    now = to_ms(T0) - 1000 - TICK_OFFSET_MS  # the tick that claims T0
    Poller(services).tick(now)
    assert fire_ats(invoker, a) == [to_ms(T0)] * 4
    # A's four runs reach their executor (their instant passed, on its clock) and hang on their target.
    first = [replace(d, fire_at_ms=0) for d in invoker.dispatches if d.tenant_id == a]
    worker = threading.Thread(target=executor.handle_event, args=(services, first))
    worker.start()
    try:
        assert wait_for(lambda: len([r for r in target.requests if r["path"] == "/a"]) == 4)
        for second in range(1, 6):
            result = Poller(services).tick(now + second * 1000)
            assert result.delayed > 0
        assert fire_ats(invoker, a) == [to_ms(T0)] * 4
        assert fire_ats(invoker, b) == [to_ms(T0) + s * 1000 for s in range(6) for _ in range(2)]
        with services.db.connection() as conn:
            notes = {row[0] for row in conn.execute(
                "SELECT last_error FROM executions WHERE tenant_id = %s AND status = 'queued'", (a,))}
        assert notes == {"delayed: tenant has 4 runs in flight (max_runs_in_flight 3)"}
    finally:
        hang.set()
        worker.join()
    assert services.redis.zcard(services.in_flight.key(a)) == 0
    Poller(services).tick(now + 6000)
    assert len(fire_ats(invoker, a)) > 4


def seat(run: str, fire_at_ms: int, tenant_id: str, budget: int, now_ms: int) -> Seat:
    return Seat(Dispatch(run, 1, fire_at_ms), tenant_id, budget, max(fire_at_ms, now_ms) + 180_000)


def test_one_instants_runs_share_its_places_and_every_other_hand_off_counts_them(services: Services) -> None:
    """The rule itself (tickwork.dueindex.inflight): budget 2. Five runs handed over ahead of one instant are
    all taken; a run of another instant is refused while they hold their places, and so is a run handed over
    at or after its instant (a retry, a run held back); the tenant never holds more than its budget less one
    plus one instant's runs."""
    places, now = services.in_flight, to_ms(T0) - 1500
    taken, held = places.take([seat(f"r{i}", to_ms(T0), "a", 2, now) for i in range(5)], now)
    assert taken == [True] * 5 and held == {"a": 5}
    taken, held = places.take([seat("next", to_ms(T0) + 1000, "a", 2, now),
                               seat("late", to_ms(T0) - 3000, "a", 2, now),
                               seat("r5", to_ms(T0), "a", 2, now)], now)
    assert taken == [False, False, True] and held == {"a": 6}
    places.release([Dispatch(f"r{i}", 1, to_ms(T0), tenant_id="a") for i in range(5)])
    taken, _ = places.take([seat("next", to_ms(T0) + 1000, "a", 2, now), seat("late", to_ms(T0) - 3000, "a", 2, now),
                            seat("after", to_ms(T0) + 2000, "a", 2, now)], now)
    # r5 holds one place: "next" is taken as the second; "late" and "after" find two of other instants.
    assert taken == [True, False, False]


# The places script of the release at 26fd9f7, as it shipped: it runs beside this one on the same sets.
RELEASED_TAKE_PLACES = """
local now, a, taken, held = tonumber(ARGV[1]), 2, {}, {}
for k = 1, #KEYS do
  local budget, n = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  a = a + 2
  redis.call('ZREMRANGEBYSCORE', KEYS[k], '-inf', now)
  local count = redis.call('ZCARD', KEYS[k])
  for i = 1, n do
    local member, lapse = ARGV[a], ARGV[a + 1]
    a = a + 2
    local holds = redis.call('ZSCORE', KEYS[k], member)
    if holds or count < budget then
      redis.call('ZADD', KEYS[k], lapse, member)
      if not holds then count = count + 1 end
      taken[#taken + 1] = 1
    else
      taken[#taken + 1] = 0
    end
  end
  local last = redis.call('ZRANGE', KEYS[k], -1, -1, 'WITHSCORES')
  if last[2] then redis.call('PEXPIRE', KEYS[k], math.max(1, tonumber(last[2]) - now)) end
  held[#held + 1] = count
end
for k = 1, #held do taken[#taken + 1] = held[k] end
return taken
"""


def test_the_released_poller_beside_this_one_counts_every_place_and_frees_them_by_member(services: Services) -> None:
    """One instant's runs over the budget, taken by this release: the release before, ticking beside it, counts
    them all and refuses (conservative, never over its budget), and its executors' give-back by member frees
    them for both."""
    released = services.redis.register_script(RELEASED_TAKE_PLACES)
    places, key, now = services.in_flight, services.in_flight.key("a"), to_ms(T0) - 1500
    taken, _ = places.take([seat(f"r{i}", to_ms(T0), "a", 2, now) for i in range(3)], now)
    assert taken == [True] * 3
    lapse = to_ms(T0) + 180_000
    assert released(keys=[key], args=[now, 2, 1, "old:1", lapse]) == [0, 3]
    for i in range(3):  # the released executor's give-back (tickwork.dueindex.inflight.InFlight.release)
        services.redis.zrem(key, f"r{i}:1")
    assert released(keys=[key], args=[now, 2, 1, "old:1", lapse]) == [1, 1]
    taken, held = places.take([seat("new", to_ms(T0) + 1000, "a", 2, now)], now)
    assert taken == [True] and held == {"a": 2}


def test_a_run_held_back_ahead_of_its_instant_waits_for_it(services: Services, invoker: Any) -> None:
    """Tenant A (max_runs_in_flight 2) holds its two places with runs of T0 that have not ended. The tick that
    claims T0 + 1 s, 1.5 s ahead, holds A's runs of that instant back: they are looked at again a second later,
    but never sent before their instant. Before, their dispatch went back in the index at that second, 0.5 s
    before their instant, and the next tick handed them over due then: sent 0.5 s early (a replay: ahead of
    its pace)."""
    a = tenant(services, "a", max_runs_in_flight=2)
    for _ in range(2):
        insert_job(services, schedule=DAILY, next_run_at=T0, tenant_id=a)
    for _ in range(2):
        insert_job(services, schedule=DAILY, next_run_at=T0 + timedelta(seconds=1), tenant_id=a)
    Poller(services).tick(to_ms(T0) - 1000 - TICK_OFFSET_MS)
    assert fire_ats(invoker, a) == [to_ms(T0)] * 2

    now = to_ms(T0) - TICK_OFFSET_MS
    assert Poller(services).tick(now).delayed == 2
    with services.db.connection() as conn:
        held = [row[0] for row in conn.execute(
            "SELECT id::text FROM executions WHERE tenant_id = %s AND scheduled_for = %s",
            (a, T0 + timedelta(seconds=1)))]
    assert [score_of(services.index, execution_member(run, 1)) for run in held] == [to_ms(T0) + 1000] * 2

    executor.give_back(services, [d for d in invoker.dispatches if d.tenant_id == a])  # A's runs of T0 ended
    Poller(services).tick(now + 1000)
    assert fire_ats(invoker, a) == [to_ms(T0)] * 2 + [to_ms(T0) + 1000] * 2
