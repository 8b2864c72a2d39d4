"""A poison entry in the poller (issue 31, item 1): the handling of one random due-index entry among 1,000 of
several tenants raises.

Break: the planner raises for one member, chosen by a seeded random among every job and one-shot run due
(the failure injected at a seam of the real code: a wrapper around the planning of one entry).
Must hold: the other 999 are claimed, recorded and dispatched in that same tick, on time (the tick, at a pinned
instant half a second before their slot, hands every one over before its slot is past); the poisoned one stays
in the due set, out of the claimable range for 5 s, and nothing is dispatched twice."""
from __future__ import annotations

import json
import random
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest

from tests.conftest import RecordingInvoker
from tests.faults.support import assert_no_double_run, next_hour
from tests.integration.helpers import due_index
from tests.support import mark_built, score_of
from tickwork.dueindex import specs as dueindex_specs
from tickwork.dispatch import planning
from tickwork.dispatch.poller import Poller
from tickwork.dueindex.entries import execution_member, job_member
from tickwork.store import executions as executions_store
from tickwork.store import jobs as jobs_store
from tickwork.store.tenants import create_tenant
from tickwork.timeutil import to_ms
from tickwork.wiring import Services

S0 = next_hour()
SLOT = S0 + timedelta(seconds=1)  # every entry's slot: one second past S0
NOW_MS = to_ms(S0) + 500  # the tick, half a second before it (where the loop ticks)
TENANTS, JOBS_EACH, RUNS_EACH = 4, 240, 10  # 960 jobs and 40 manual runs: 1,000 entries due
REQUEST = json.dumps({"method": "POST", "url": "http://127.0.0.1:9/hook", "headers": {}, "body": None})
RETRY = json.dumps({"strategy": "fixed", "max_attempts": 1, "delay_seconds": 1})


class Poisoned(RuntimeError):
    """The injected failure."""


def _due(svc: Services) -> tuple[list[str], list[str]]:
    """1,000 entries due at SLOT over TENANTS tenants, all indexed: jobs at second 1 of every minute and manual
    runs (one-shot `e:` members). Returns the members of each kind."""
    jobs, runs = [], []
    with svc.db.connection() as conn:
        for t in range(TENANTS):
            tenant_id = create_tenant(conn, f"tenant-{t}")
            ids = [str(uuid.uuid4()) for _ in range(JOBS_EACH)]
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO jobs (id, tenant_id, name, schedule, timezone, request, retry, status, next_run_at)"
                    " VALUES (%s, %s, 'job', '1 * * * * *', 'UTC', %s, %s, 'active', %s)",
                    [(job_id, tenant_id, REQUEST, RETRY, SLOT) for job_id in ids])
            pipe = svc.index.pipeline()
            for job in jobs_store.get_jobs(conn, ids):
                dueindex_specs.index_job(svc.index, job, pipeline=pipe)
            for job_id in ids[:RUNS_EACH]:  # a manual run of some of them, due at the same instant
                run_id = executions_store.insert_manual(conn, tenant_id, job_id, SLOT)
                svc.index.schedule_execution(run_id, 1, to_ms(SLOT), pipeline=pipe)
                runs.append(execution_member(run_id, 1))
            pipe.execute()
            jobs += [job_member(job_id) for job_id in ids]
    mark_built(due_index(svc), to_ms(S0))
    return jobs, runs


@pytest.mark.parametrize("kind,seed", [("job", 31), ("job", 7), ("one-shot", 31)])
def test_one_random_entry_raising_among_1000_leaves_the_other_999_claimed_on_time(
    services: Services, invoker: RecordingInvoker, monkeypatch: pytest.MonkeyPatch, kind: str, seed: int,
) -> None:
    jobs, runs = _due(services)
    victim = random.Random(seed).choice(jobs if kind == "job" else runs)
    plan_entry = planning._plan_entry

    def poisoned(plan: Any, entry: Any, *args: Any) -> None:
        if entry.member == victim:
            raise Poisoned("the injected failure")
        plan_entry(plan, entry, *args)

    monkeypatch.setattr(planning, "_plan_entry", poisoned)
    polling = Poller(services, plan_seconds=60.0, clock=lambda: 0.0)  # planning never runs out of time

    started = time.perf_counter()
    result = polling.tick(NOW_MS)
    took = time.perf_counter() - started

    assert result.quarantined == 1 and result.claimed == 999 and result.dispatched == 999
    assert len(invoker.dispatches) == 999
    assert all(d.fire_at_ms == to_ms(SLOT) > NOW_MS for d in invoker.dispatches)  # handed over before the slot
    assert score_of(services.index, victim) == NOW_MS + 5_000  # kept, out of reach
    others = [m for m in jobs if m != victim]
    assert all(score_of(services.index, m) == to_ms(SLOT) + 60_000 for m in others[:: len(others) // 50])
    assert_no_double_run(invoker)
    print(f"\n{kind} {victim} poisoned (seed {seed}): 999 others claimed and dispatched in one tick of {took:.3f} s, "
          f"{NOW_MS - to_ms(SLOT)} ms to their slot at the pinned tick")
