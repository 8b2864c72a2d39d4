"""A replayed run's attempts end by the replay's rules on every path that ends one: the executor, the callback
route (POST /callbacks/...) and the maintenance pass. The retry policy counts the replay's attempts only (the
job's max_attempts again) and a retry is bounded by the job's next slot after the replay, not after the run's
old slot (tickwork.rules.replay). Real Postgres, Redis, HTTP target and API handler; every clock pinned."""
from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from tests.conftest import Target
from tests.integration.api_client import Api, use_clock
from tests.integration.helpers import executor_at, insert_job
from tests.support import FakeClock, score_of
from tickwork.dispatch.poller import Poller
from tickwork.models import Dispatch
from tickwork.ops.maintenance import run_maintenance
from tickwork.timeutil import rfc3339, to_ms
from tickwork.wiring import Services

# On the hour: the hourly job's next slot after the replay is an hour after it, after the old slot a day before.
T0 = datetime(2027, 2, 3, 12, 0, 0, tzinfo=timezone.utc)
REPLAYED_AT = T0 + timedelta(days=1)
PUBLIC = "https://api.example.com"
TIMEOUT = 60
RETRY = {"strategy": "fixed", "max_attempts": 3, "delay_seconds": 1, "jitter": "none", "past_next_run": False}


@pytest.fixture
def svc(api: Api, services: Services) -> Services:
    """The executor's and maintenance's services (the API's are its own, `api`), with a public API URL; the
    retention keeps runs created at any wall-clock time since 1970 (the pass's `now` is pinned, not the rows')."""
    services.settings = replace(services.settings, public_api_url=PUBLIC, retention_days=36_500)
    return services


@pytest.fixture
def api_clock(api: Api) -> FakeClock:
    clock = FakeClock(T0)
    use_clock(clock.time)  # after `api`, whose settings would replace the clock
    return clock


def _hourly_callback_job(svc: Services, api: Api, url: str) -> str:
    job_id = insert_job(svc, schedule="0 * * * *", next_run_at=T0, url=url, tenant_id=api.tenant_id, retry=RETRY)
    with svc.db.connection() as conn:
        conn.execute("UPDATE jobs SET completion = %s WHERE id = %s",
                     (json.dumps({"mode": "callback", "timeout_seconds": TIMEOUT}), job_id))
    return job_id


def _queued(svc: Services, run_id: str, attempt: int) -> Dispatch:
    """The dispatch of `attempt` as the due index holds it (a retry's, a replay's)."""
    due = score_of(svc.index, f"e:{run_id}:{attempt}")
    assert due is not None, f"attempt {attempt} is not queued"
    return Dispatch(run_id, attempt, due)


def _send(svc: Services, target: Target, dispatch: Dispatch) -> tuple[str, datetime]:
    """Send the dispatch at its time; returns its callback URL's path and that time."""
    at = datetime.fromtimestamp(dispatch.fire_at_ms / 1000, tz=timezone.utc)
    assert executor_at(svc, FakeClock(at)).run([dispatch]) == ["awaiting_completion"]
    url = target.requests[-1]["headers"]["Tickwork-Callback-Url"]
    assert url.startswith(f"{PUBLIC}/callbacks/{dispatch.execution_id}/{dispatch.attempt}/")
    return url.removeprefix(PUBLIC), at


def _call_back_failed(api: Api, clock: FakeClock, path: str, at: datetime) -> dict[str, Any]:
    clock.at = at
    reply = api.call("POST", path, {"status": "failed", "output": "disk full"}, token=None)
    assert reply.status == 200, reply.body
    return reply.body


def _run(svc: Services, run_id: str) -> tuple[Any, ...]:
    with svc.db.connection() as conn:
        return conn.execute("SELECT status, attempt_count, next_attempt_at FROM executions WHERE id = %s",
                            (run_id,)).fetchone()


def _errors(svc: Services, run_id: str) -> list[tuple[int, str]]:
    with svc.db.connection() as conn:
        return conn.execute("SELECT number, error FROM attempts WHERE execution_id = %s ORDER BY number",
                            (run_id,)).fetchall()


def _fail_three_times_then_replay(svc: Services, api: Api, clock: FakeClock, target: Target) -> str:
    """The run of T0's slot fails its three attempts by callback; replayed a day later. Returns its id."""
    target.default_status = 202
    _hourly_callback_job(svc, api, target.url + "/work")
    Poller(svc).tick(to_ms(T0))
    first = svc.invoker.dispatches[-1]  # type: ignore[union-attr]
    run_id = first.execution_id
    for attempt, status in ((1, "retrying"), (2, "retrying"), (3, "failed")):
        path, sent_at = _send(svc, target, first if attempt == 1 else _queued(svc, run_id, attempt))
        assert _call_back_failed(api, clock, path, sent_at + timedelta(milliseconds=500))["status"] == status
    assert _run(svc, run_id)[0:2] == ("failed", 3)
    clock.at = REPLAYED_AT
    replayed = api.call("POST", f"/executions/{run_id}/replay")
    assert replayed.status == 202, replayed.body
    return run_id


def test_a_replayed_callback_run_reported_failed_gets_the_replays_attempts_bounded_from_the_replay(
        svc: Services, api: Api, api_clock: FakeClock, target: Target) -> None:
    run_id = _fail_three_times_then_replay(svc, api, api_clock, target)
    for attempt in (4, 5):
        path, _ = _send(svc, target, _queued(svc, run_id, attempt))
        reported = REPLAYED_AT + timedelta(seconds=2 * (attempt - 3))
        # The replay's 1st and 2nd attempts (of max_attempts 3); the next slot after the replay is 13:00, a day
        # after the one after the run's own slot: the retry is not "after the job's next run".
        assert _call_back_failed(api, api_clock, path, reported) == {
            "execution_id": run_id, "attempt": attempt, "status": "retrying"}
        assert _run(svc, run_id) == ("retrying", attempt, reported + timedelta(seconds=1))
        assert score_of(svc.index, f"e:{run_id}:{attempt + 1}") == to_ms(reported + timedelta(seconds=1))
    path, _ = _send(svc, target, _queued(svc, run_id, 6))
    assert _call_back_failed(api, api_clock, path, REPLAYED_AT + timedelta(seconds=6))["status"] == "failed"
    assert _run(svc, run_id) == ("failed", 6, None)
    assert [error for _, error in _errors(svc, run_id)] == ["failed: reported by its completion callback"] * 6
    shown = api.call("GET", f"/executions/{run_id}").body
    assert (shown["status"], shown["attempt_count"], shown["replay_count"]) == ("failed", 6, 1)


def test_maintenance_ends_a_replayed_runs_lost_callback_wait_by_the_replays_rules(
        svc: Services, api: Api, api_clock: FakeClock, target: Target) -> None:
    run_id = _fail_three_times_then_replay(svc, api, api_clock, target)
    _, sent_at = _send(svc, target, _queued(svc, run_id, 4))
    svc.index.redis.zrem(svc.index.shard_of_member(f"c:{run_id}:4").due_key, f"c:{run_id}:4")  # Redis lost it
    swept = sent_at + timedelta(seconds=TIMEOUT + svc.settings.sweep_after_seconds + 1)
    assert run_maintenance(svc, swept).completions_settled == 1
    assert _run(svc, run_id) == ("retrying", 4, swept + timedelta(seconds=1))
    assert _errors(svc, run_id)[-1] == (4, f"no completion within {TIMEOUT} s")
    assert score_of(svc.index, f"e:{run_id}:5") == to_ms(swept + timedelta(seconds=1))


def test_maintenance_ends_a_replayed_runs_lost_executor_attempt_by_the_replays_rules(
        svc: Services, api: Api, api_clock: FakeClock, target: Target) -> None:
    """The other attempt maintenance ends: one whose executor never reported (the run stays `running`)."""
    run_id = _fail_three_times_then_replay(svc, api, api_clock, target)
    with svc.db.connection() as conn:  # attempt 4 started, as an executor that died leaves it
        conn.execute("UPDATE executions SET status = 'running', attempt_count = 4, attempt_started_at = %s"
                     " WHERE id = %s", (REPLAYED_AT, run_id))
    swept = REPLAYED_AT + timedelta(minutes=5)
    report = run_maintenance(svc, swept)
    assert (report.retried, report.lost) == (1, 0)
    status, attempts, next_at = _run(svc, run_id)
    assert (status, attempts, rfc3339(next_at)) == ("retrying", 4, rfc3339(swept + timedelta(seconds=1)))
    assert _errors(svc, run_id)[-1][1].startswith("lost: executor did not report within")
