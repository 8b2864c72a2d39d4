"""Fair share in the poller against real Postgres and Redis: one tenant's catch-up backlog neither delays
another tenant's on-time runs nor takes another tenant's backlog turn (#22)."""
from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Iterator

import pytest

from tests.integration.helpers import due_index, insert_job
from tests.support import mark_built, score_of
from tickwork.dueindex import specs as dueindex_specs
from tickwork.dispatch.poller import Poller
from tickwork.store import jobs as jobs_store
from tickwork.store.tenants import create_tenant
from tickwork.timeutil import to_ms
from tickwork.wiring import Services, build_services

T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)
SECOND = timedelta(seconds=1)
SHARE = 20  # backlog claims per tenant per tick
TICKS = 5


@pytest.fixture
def small(services: Services, invoker) -> Iterator[Services]:
    """Batches of 50 and a backlog share of 20: a backlog of 60 jobs fills every batch, as 1,000 would."""
    svc = build_services(replace(services.settings, batch_size=50, backlog_per_tenant=SHARE), invoker=invoker)
    try:
        yield svc
    finally:
        svc.close()


def _jobs(svc: Services, tenant: str, count: int, next_run_at: datetime, catchup: str, window: int) -> list[str]:
    with svc.db.connection() as conn:
        tenant_id = create_tenant(conn, tenant)
    ids = [insert_job(svc, schedule="* * * * * *", next_run_at=next_run_at, tenant_id=tenant_id, index=False)
           for _ in range(count)]
    with svc.db.connection() as conn:
        conn.execute("UPDATE jobs SET catchup = %s, catchup_window_seconds = %s WHERE id = ANY(%s::uuid[])",
                     (catchup, window, ids))
        for job in jobs_store.get_jobs(conn, ids):
            dueindex_specs.index_job(due_index(svc), job)
    return ids


def _slots(svc: Services, job_ids: list[str]) -> list[tuple[str, datetime, str]]:
    with svc.db.connection() as conn:
        return conn.execute("SELECT job_id::text, scheduled_for, status FROM executions"
                            " WHERE job_id = ANY(%s::uuid[]) ORDER BY job_id, scheduled_for", (job_ids,)).fetchall()


def test_a_tenants_catch_up_backlog_never_delays_another_tenants_runs(small: Services) -> None:
    """Break: tenant A's 60 every-second `catchup: all` jobs come back 30 minutes behind (1,800 slots each,
    all inside their hour's window), more than a batch of them. Tenant B's 5 every-second jobs are on time;
    tenant C's 3 are 10 minutes behind, behind all of A's in score order.
    Must hold, tick after tick while A's backlog drains: every slot of B fired at its time, none missed; A
    and C each claim backlog every tick, at most their share; no slot of anyone lost or run twice."""
    a = _jobs(small, "a", 60, T0 - timedelta(minutes=30), "all", 3600)
    b = _jobs(small, "b", 5, T0, "latest", 300)
    c = _jobs(small, "c", 3, T0 - timedelta(minutes=10), "all", 3600)
    mark_built(due_index(small), to_ms(T0))
    poller = Poller(small, clock=lambda: 0.0)  # planning never runs out of time here: that is another test
    claimed_a, claimed_c = [], []
    for tick in range(TICKS):
        result = poller.tick(to_ms(T0 + tick * SECOND) + 500)
        assert result.deferred > 0  # A's entries past its share were passed over, not claimed
        # B: each slot from T0 up to the lookahead's horizon, once, queued to fire at its time.
        expected = [(job, T0 + s * SECOND, "queued") for job in sorted(b) for s in range(tick + 3)]
        assert _slots(small, b) == expected
        claimed_a.append(len(_slots(small, a)))
        claimed_c.append(len(_slots(small, c)))
    per_tick_a = [n - m for n, m in zip(claimed_a, [0, *claimed_a])]
    per_tick_c = [n - m for n, m in zip(claimed_c, [0, *claimed_c])]
    assert per_tick_a == [SHARE] * TICKS
    assert all(len(c) <= n <= SHARE for n in per_tick_c), per_tick_c
    # A's and C's runs are their oldest slots in order, each once, all fired (inside the window): per
    # job a gapless run of slots from its first, and the job's score on the slot after the last.
    for job_ids, start in ((a, T0 - timedelta(minutes=30)), (c, T0 - timedelta(minutes=10))):
        runs = _slots(small, job_ids)
        assert {status for _, _, status in runs} == {"queued"}
        fired = Counter(job for job, _, _ in runs)
        for job in job_ids:
            mine = [slot for j, slot, _ in runs if j == job]
            assert mine == [start + s * SECOND for s in range(fired[job])]
            assert score_of(due_index(small), f"j:{job}") == to_ms(start + fired[job] * SECOND)


def test_a_job_back_from_its_backlog_is_claimed_ahead_in_the_same_tick(small: Services) -> None:
    """A job an hour behind fires its latest slot from the backlog; its next slots, now inside the
    lookahead, are claimed in the same tick as an on-time job's would be, not a tick late."""
    (job,) = _jobs(small, "a", 1, T0 - timedelta(hours=1), "latest", 300)
    mark_built(due_index(small), to_ms(T0))
    Poller(small, clock=lambda: 0.0).tick(to_ms(T0) + 500)
    runs = _slots(small, [job])
    assert [(slot, status) for _, slot, status in runs] == [
        (T0 - timedelta(hours=1), "missed"), (T0, "queued"), (T0 + SECOND, "queued"), (T0 + 2 * SECOND, "queued")]
