"""Replay end to end on the local runtime (real API server, poller, executors, PostgreSQL and Redis, the wall
clock) against a stock http.server that fails, then succeeds: the run is sent again as the same run, with
new attempts after the old ones and a fresh signature that the official Standard Webhooks library accepts."""
from __future__ import annotations

import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from typing import Any, Iterator

import psycopg
import pytest
from standardwebhooks.webhooks import Webhook

from tests.conftest import Target
from tests.local.test_local_runtime import call, runtime  # noqa: F401 - the fixture
from tests.integration.helpers import API_POLL_INTERVAL
from tests.support import wait_for
from tickwork_local.runtime import LocalRuntime

pytestmark = pytest.mark.slow

WAIT_SECONDS = 30.0


@pytest.fixture
def stock_target() -> Iterator[Target]:
    server = Target(stock=True)  # Python's http.server as it comes: HTTP/1.0, no Content-Length
    yield server
    server.close()


def finished(runtime: LocalRuntime, run_id: str) -> dict[str, Any] | None:
    status, run = call(runtime, "GET", f"/executions/{run_id}")
    assert status == 200, run
    return run if run["status"] in ("succeeded", "failed", "lost") else None


def test_a_failed_run_replayed_succeeds_as_the_same_run(runtime: LocalRuntime,  # noqa: F811
                                                        stock_target: Target) -> None:
    stock_target.statuses = [503, 503, 503]  # both attempts of the run, then the replay's first
    at = datetime.fromtimestamp(int(time.time()) + 3, tz=timezone.utc)
    status, job = call(runtime, "POST", "/jobs", {
        "name": "flaky", "schedule": f"at({at.strftime('%Y-%m-%dT%H:%M:%S')})",
        "request": {"method": "POST", "url": stock_target.url + "/hook", "body": '{"n":1}'},
        "retry": {"strategy": "fixed", "max_attempts": 2, "delay_seconds": 1, "jitter": "none"},
    })
    assert status == 201, job
    assert wait_for(lambda: call(runtime, "GET", f"/jobs/{job['id']}/executions")[1]["items"], timeout=WAIT_SECONDS, interval=API_POLL_INTERVAL)
    run_id = call(runtime, "GET", f"/jobs/{job['id']}/executions")[1]["items"][0]["id"]
    assert wait_for(lambda: finished(runtime, run_id), timeout=WAIT_SECONDS, interval=API_POLL_INTERVAL)
    failed = finished(runtime, run_id)
    assert failed is not None and (failed["status"], failed["attempt_count"]) == ("failed", 2)

    asked = time.time()
    status, queued = call(runtime, "POST", f"/executions/{run_id}/replay")
    assert status == 202, queued
    assert (queued["id"], queued["replay_count"]) == (run_id, 1)
    assert wait_for(lambda: finished(runtime, run_id), timeout=WAIT_SECONDS, interval=API_POLL_INTERVAL)
    done = finished(runtime, run_id)
    assert done is not None
    # The replay had attempts of its own (max_attempts 2): 3 failed, 4 succeeded.
    assert (done["status"], done["attempt_count"], done["replay_count"]) == ("succeeded", 4, 1)
    assert [(a["number"], a["status_code"]) for a in done["attempts"]] == [(1, 503), (2, 503), (3, 503), (4, 200)]

    deliveries = Counter(r["headers"]["Tickwork-Run-Id"] for r in stock_target.requests)
    assert deliveries == {run_id: 4}
    assert [r["headers"]["Tickwork-Attempt"] for r in stock_target.requests] == ["1", "2", "3", "4"]
    assert {r["headers"]["webhook-id"] for r in stock_target.requests} == {f"{done['job_id']}:{run_id}"}
    secret = call(runtime, "GET", "/signing-secret")[1]["secret"]
    for request in stock_target.requests[2:]:
        assert int(request["headers"]["webhook-timestamp"]) >= int(asked)  # signed afresh, at the replay
        headers = {k.lower(): v for k, v in request["headers"].items()}
        Webhook(secret).verify(request["body"], headers)  # raises if the signature does not hold


def test_a_window_of_missed_and_failed_runs_is_sent_once_each_in_slot_order(runtime: LocalRuntime,  # noqa: F811
                                                                            stock_target: Target) -> None:
    status, job = call(runtime, "POST", "/jobs", {
        "name": "paused", "schedule": "0 0 * * * *",
        "request": {"method": "POST", "url": stock_target.url + "/hourly"},
        "retry": {"strategy": "fixed", "max_attempts": 1, "delay_seconds": 1},
    })
    assert status == 201, job
    assert call(runtime, "POST", f"/jobs/{job['id']}/pause")[0] == 200  # replays go ahead on a paused job
    now = datetime.now(timezone.utc)
    slots = [now - timedelta(hours=h) for h in (3, 2, 1)]
    with psycopg.connect(runtime.settings.database_url, autocommit=True) as conn:
        for slot, status_ in zip(slots, ("failed", "missed", "lost")):
            conn.execute("INSERT INTO executions (id, tenant_id, job_id, scheduled_for, trigger, status, attempt_count,"
                         " finished_at) VALUES (gen_random_uuid(), %s, %s, %s, 'schedule', %s, %s, %s)",
                         (runtime.tenant_id, job["id"], slot, status_, 0 if status_ == "missed" else 1, slot))
    status, answer = call(runtime, "POST", f"/jobs/{job['id']}/replay", {
        "since": (now - timedelta(days=1)).isoformat(), "until": now.isoformat()})
    assert status == 202 and answer["count"] == 3, answer
    assert wait_for(lambda: len(stock_target.requests) == 3, timeout=WAIT_SECONDS, interval=API_POLL_INTERVAL)
    ids = answer["execution_ids"]
    with psycopg.connect(runtime.settings.database_url, autocommit=True) as conn:
        slot_of = dict(conn.execute("SELECT id::text, scheduled_for FROM executions WHERE id = ANY(%s::uuid[])",
                                    (ids,)).fetchall())
    # Paced in slot order, 1/rate apart. Arrival order is not asserted: a tick that comes late on a loaded
    # machine hands several paced runs to executors at once, and they finish in any order.
    assert [slot_of[run_id] for run_id in ids] == sorted(slots)
    assert datetime.fromisoformat(answer["first_at"]) < datetime.fromisoformat(answer["last_at"])
    sent = {r["headers"]["Tickwork-Run-Id"]: r["headers"]["Tickwork-Attempt"] for r in stock_target.requests}
    assert len(stock_target.requests) == 3  # once each
    assert sent == dict(zip(ids, ["2", "1", "2"]))
    assert wait_for(lambda: all(finished(runtime, run_id) for run_id in answer["execution_ids"]), timeout=WAIT_SECONDS, interval=API_POLL_INTERVAL)
