"""Postgres faults: unreachable during a tick, and during the executor's write of a result."""
from __future__ import annotations

from datetime import timedelta
from typing import Iterator

import psycopg_pool
import pytest

from tests.conftest import RecordingInvoker, Target
from tests.faults.support import FINAL, HOURLY, execute, next_hour, next_slot_fires, slot_statuses, unused_port
from tests.integration.helpers import attempts, due_index, insert_job
from tests.support import mark_built
from tickwork.dispatch.poller import Poller
from tickwork.http import delivery
from tickwork.ops.maintenance import run_maintenance
from tickwork.outcome import Outcome
from tickwork.timeutil import to_ms
from tickwork.wiring import Services, connect_db

S0 = next_hour()
HOUR = timedelta(hours=1)


@pytest.fixture
def dead_pool() -> Iterator[psycopg_pool.ConnectionPool]:
    """A real pool whose server is gone: every checkout times out (nothing listens on its port)."""
    pool = psycopg_pool.ConnectionPool(f"postgresql://postgres@127.0.0.1:{unused_port()}/postgres",
                                       min_size=1, max_size=1, timeout=0.5, open=True)
    yield pool
    pool.close(timeout=0)


def test_a_tick_while_postgres_is_down_loses_no_slot(
    services: Services, invoker: RecordingInvoker, target: Target, dead_pool: psycopg_pool.ConnectionPool,
) -> None:
    """Break: Postgres is unreachable when the tick records its claim (the Redis claim already happened).
    Must hold: the tick fails without dispatching; after recovery, maintenance puts the slot back and it
    runs exactly once, the following slot fires, and every slot ends run, skipped, missed or lost."""
    job_id = insert_job(services, schedule=HOURLY, next_run_at=S0, url=target.url + "/hook")
    mark_built(due_index(services), to_ms(S0))
    down = Services(services.settings, dead_pool, services.redis, invoker)
    with pytest.raises(psycopg_pool.PoolTimeout):
        Poller(down).tick(to_ms(S0))
    assert Poller(down).tick(to_ms(S0) + 1_000).dispatched == 0  # nothing more is due: it needs no database
    assert invoker.dispatches == []

    assert run_maintenance(services, S0 + timedelta(seconds=15)).rewound == 1
    assert Poller(services).tick(to_ms(S0) + 15_000).dispatched == 1
    execute(services, invoker.dispatches, S0 + timedelta(seconds=15))
    next_slot_fires(services, invoker, target, job_id, S0 + HOUR, {S0: "succeeded"})
    assert set(slot_statuses(services, job_id).values()) <= FINAL


def test_postgres_down_while_the_executor_stores_the_result(
    services: Services, invoker: RecordingInvoker, target: Target, dead_pool: psycopg_pool.ConnectionPool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Break: the executor started the run and sent the request; Postgres is unreachable when it stores
    the result. Must hold: the run is not sent again by the same attempt; once Postgres is back,
    maintenance ends it `lost` (no attempt left), never silently running; the following slot fires."""
    job_id = insert_job(services, schedule=HOURLY, next_run_at=S0, url=target.url + "/hook",
                        retry={"strategy": "fixed", "max_attempts": 1, "delay_seconds": 1})
    mark_built(due_index(services), to_ms(S0))
    Poller(services).tick(to_ms(S0))
    executor_svc = Services(services.settings, connect_db(services.settings, 1), services.redis, invoker)
    real_complete = delivery.Prepared.complete

    def send_then_lose_postgres(prepared: delivery.Prepared) -> Outcome:
        outcome = real_complete(prepared)
        executor_svc.db.close()
        executor_svc.db = dead_pool
        return outcome

    monkeypatch.setattr(delivery.Prepared, "complete", send_then_lose_postgres)
    with pytest.raises(psycopg_pool.PoolTimeout):
        execute(executor_svc, invoker.dispatches, S0)
    monkeypatch.undo()
    assert slot_statuses(services, job_id) == {S0: "running"}

    assert run_maintenance(services, S0 + timedelta(seconds=120)).lost == 1
    run_id = invoker.dispatches[0].execution_id
    assert [a[4] for a in attempts(services, run_id)] == ["lost: executor did not report within 65 s"]
    next_slot_fires(services, invoker, target, job_id, S0 + HOUR, {S0: "lost"})
    assert set(slot_statuses(services, job_id).values()) <= FINAL
