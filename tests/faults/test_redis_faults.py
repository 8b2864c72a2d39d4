"""Redis faults: the due index loses every key, or Redis cannot be reached for a while."""
from __future__ import annotations

from datetime import timedelta
from typing import Iterator

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.conftest import RecordingInvoker, Target
from tests.faults.support import (
    HOURLY,
    assert_no_double_run,
    execute,
    next_hour,
    next_slot_fires,
    sent,
    slot_statuses,
    unused_port,
)
from tests.integration.helpers import due_index, insert_job
from tests.support import mark_built, score_of
from tickwork.dispatch.poller import Poller
from tickwork.ops.maintenance import run_maintenance
from tickwork.timeutil import to_ms
from tickwork.wiring import Services

S0 = next_hour()
HOUR = timedelta(hours=1)


def _flush_namespace(svc: Services) -> None:
    """FLUSHALL, limited to this test's keys: the Redis server is shared."""
    keys = list(svc.redis.scan_iter(match="{" + svc.settings.namespace + "}:*"))
    assert keys
    svc.redis.delete(*keys)


@pytest.fixture
def redis_down(services: Services) -> Iterator[Services]:
    """The same deployment, but Redis refuses connections (nothing listens on its port)."""
    client = redis.Redis(port=unused_port(), decode_responses=True, socket_connect_timeout=0.5,
                         retry=Retry(NoBackoff(), 0))
    yield Services(services.settings, services.db, client, services.invoker)
    client.close()


def test_flushed_index_is_complete_again_after_one_maintenance_pass(
    services: Services, invoker: RecordingInvoker, target: Target,
) -> None:
    """Break: Redis loses every key (FLUSHALL, a failover to an empty replica) while a retry is pending.
    Must hold: one maintenance pass restores every active job at its recorded next slot and the pending
    retry at its own time; nothing already recorded runs again; every later slot fires once."""
    retried = insert_job(services, schedule=HOURLY, next_run_at=S0, url=target.url + "/a",
                         retry={"strategy": "fixed", "max_attempts": 3, "delay_seconds": 600})
    later = insert_job(services, schedule="30 * * * *", next_run_at=S0 + timedelta(minutes=30), url=target.url + "/b")
    assert Poller(services).tick(to_ms(S0)).dispatched == 1
    target.statuses = [503]
    assert execute(services, invoker.dispatches, S0 + timedelta(seconds=1)) == ["retrying"]
    run_id = invoker.dispatches[0].execution_id
    _flush_namespace(services)

    report = run_maintenance(services, S0 + timedelta(seconds=5))
    index = due_index(services)
    assert (report.indexed, report.redispatched) == (2, 1)
    assert score_of(index, f"j:{retried}") == to_ms(S0 + HOUR)
    assert score_of(index, f"j:{later}") == to_ms(S0 + timedelta(minutes=30))
    assert score_of(index, f"e:{run_id}:2") == to_ms(S0 + timedelta(seconds=601))
    assert Poller(services).tick(to_ms(S0) + 6_000).dispatched == 0  # S0 is not run again

    for at in (S0 + timedelta(seconds=601), S0 + timedelta(minutes=30), S0 + HOUR):
        assert Poller(services).tick(to_ms(at)).dispatched == 1
        execute(services, invoker.dispatches[-1:], at)
    assert slot_statuses(services, retried) == {S0: "succeeded", S0 + HOUR: "succeeded"}
    assert slot_statuses(services, later) == {S0 + timedelta(minutes=30): "succeeded"}
    assert sent(target)[:2] == [(run_id, "1"), (run_id, "2")]
    assert_no_double_run(invoker, target)


def test_ticks_while_redis_is_down_fail_cleanly_and_the_next_tick_catches_up(
    services: Services, redis_down: Services, invoker: RecordingInvoker, target: Target,
) -> None:
    """Break: Redis is unreachable for a few ticks and a maintenance pass.
    Must hold: each fails with a connection error and leaves Postgres untouched; once Redis is back the
    next tick fires the due slot exactly once and the following slot fires."""
    job_id = insert_job(services, schedule=HOURLY, next_run_at=S0, url=target.url + "/hook")
    mark_built(due_index(services), to_ms(S0))
    for offset_ms in (-1_000, 0, 1_000, 2_000):
        with pytest.raises(redis.ConnectionError):
            Poller(redis_down).tick(to_ms(S0) + offset_ms)
    with pytest.raises(redis.ConnectionError):
        run_maintenance(redis_down, S0 + timedelta(seconds=2))
    with services.db.connection() as conn:
        assert conn.execute("SELECT next_run_at FROM jobs WHERE id = %s", (job_id,)).fetchone()[0] == S0
    assert slot_statuses(services, job_id) == {}

    assert Poller(services).tick(to_ms(S0) + 3_000).dispatched == 1
    assert Poller(services).tick(to_ms(S0) + 4_000).dispatched == 0
    execute(services, invoker.dispatches, S0 + timedelta(seconds=3))
    next_slot_fires(services, invoker, target, job_id, S0 + HOUR, {S0: "succeeded"})


def test_a_retry_scheduled_while_redis_is_down_is_not_lost(
    services: Services, redis_down: Services, invoker: RecordingInvoker, target: Target,
) -> None:
    """Break: an attempt fails while Redis is unreachable, so the executor stores `retrying` in Postgres
    but cannot put the next attempt in the due index.
    Must hold: once Redis is back, maintenance puts the overdue retry back; it runs once, same run id."""
    job_id = insert_job(services, schedule=HOURLY, next_run_at=S0, url=target.url + "/hook")
    mark_built(due_index(services), to_ms(S0))
    Poller(services).tick(to_ms(S0))
    target.statuses = [503]
    with pytest.raises(redis.ConnectionError):
        execute(redis_down, invoker.dispatches, S0)
    run_id = invoker.dispatches[0].execution_id
    assert slot_statuses(services, job_id) == {S0: "retrying"}

    sweep_at = S0 + timedelta(seconds=70)
    assert run_maintenance(services, sweep_at).redispatched == 1
    assert Poller(services).tick(to_ms(sweep_at)).dispatched == 1
    assert execute(services, invoker.dispatches[1:], sweep_at) == ["succeeded"]
    assert sent(target) == [(run_id, "1"), (run_id, "2")]
    next_slot_fires(services, invoker, target, job_id, S0 + HOUR, {S0: "succeeded"})
