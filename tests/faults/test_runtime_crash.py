"""The whole runtime killed while it runs, against a stock server: the fault run of issue 20.

`python -m tickwork_local` sends 100 every-second jobs to Python's stock http.server (HTTP/1.0, the body
ended by the close); Redis loses every key of the deployment; the process is killed with SIGKILL and
started again. The target counts every delivery by run id. This waits on the wall clock: marked slow.

It runs twice: with the local runtime's plain invoker, and with its chaotic one (TICKWORK_LOCAL_CHAOS,
tickwork_local.chaos), which delivers executor events as Lambda may: twice, late, throttled (and dropped when
too old), retried after a function error, and killed before their write or after their work. Kills after a
write, whose runs are sent again by design, are tests/faults/test_lambda_semantics.py's to count.
"""
from __future__ import annotations

import json
import signal
import time
import urllib.request
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis

from tests.conftest import Target
from tests.integration.helpers import free_port, start_process, stop_process
from tickwork.settings import Settings
from tickwork.timeutil import parse_rfc3339

pytestmark = [pytest.mark.slow, pytest.mark.realtime]

JOBS = 100
# Long enough for several runs of every job on each side of each fault, short enough for the suite.
RUN_BEFORE_FLUSH_SECONDS = 5.0
RUN_BEFORE_KILL_SECONDS = 4.0
DOWN_SECONDS = 1.0
RUN_AFTER_RESTART_SECONDS = 6.0
# Runs claimed ahead of the kill (up to the 1.5 s lookahead, one tick more) may have been written to the
# target without their result reaching Postgres: their slots make the crash window.
CRASH_WINDOW_BEFORE = timedelta(seconds=2.5)
CRASH_WINDOW_AFTER = timedelta(seconds=DOWN_SECONDS + 1)
# Lambda's timings shortened to the test's seconds: a function error retried 1 s then 2 s later, events older
# than 5 s dropped; the sweeper's delays likewise.
CHAOTIC = {
    "TICKWORK_LOCAL_CHAOS": "21,duplicate=0.15,delay=0.15,throttle=0.1,kill=0.08,kill_points=before_write/after_work,"
                            "retry_delay_seconds=1,throttle_backoff_seconds=0.5,max_event_age_seconds=5",
    "TICKWORK_SWEEP_AFTER_SECONDS": "2", "TICKWORK_LOST_MARGIN_SECONDS": "3",
}


def _api(url: str, key: str, method: str, path: str, body: Any = None) -> Any:
    request = urllib.request.Request(url + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read() or b"null")


def _flush(settings: Settings) -> int:
    """FLUSHALL, limited to this test's keys (the Redis server is shared)."""
    client = redis.Redis.from_url(settings.redis_url)
    try:
        keys = list(client.scan_iter(match="{" + settings.namespace + "[}/]*"))
        return int(client.delete(*keys)) if keys else 0
    finally:
        client.close()


@pytest.mark.parametrize("invoker_env", [pytest.param({}, id="thread-pool"), pytest.param(CHAOTIC, id="chaotic")])
def test_a_runtime_killed_after_redis_lost_its_keys_sends_no_slot_twice_and_loses_none(
    settings: Settings, tmp_path: Path, invoker_env: dict[str, str],
) -> None:
    """Break: Redis loses the whole due index while 100 every-second jobs run; seconds later the process
    is killed (SIGKILL) and started again over the same Postgres and Redis.
    Must hold: no run id reaches the target twice outside the crash window; every delivered run has its
    row and every run recorded `succeeded` was delivered once; every second of every job between its
    first and last recorded slot has a row (run, or recorded missed): no slot silently lost."""
    target = Target(stock=True)
    port = free_port()
    env = {"TICKWORK_RATE_LIMIT_PER_SECOND": "0", "TICKWORK_TENANT_RATE_LIMIT_PER_SECOND": "0", **invoker_env}
    process, url, key = start_process(settings, tmp_path, port, env)
    try:
        job_ids = [_api(url, key, "POST", "/jobs", {
            "name": f"crash-{n}", "schedule": "* * * * * *",
            "request": {"method": "POST", "url": target.url + f"/hook/{n}", "body": "{}", "timeout_seconds": 5},
            "retry": {"strategy": "fixed", "max_attempts": 3, "delay_seconds": 1},
        })["id"] for n in range(JOBS)]
        time.sleep(RUN_BEFORE_FLUSH_SECONDS)
        assert _flush(settings) > 0
        time.sleep(RUN_BEFORE_KILL_SECONDS)
        process.kill()
        killed_at = datetime.now(timezone.utc)
        process.wait(10)
        time.sleep(DOWN_SECONDS)
        process, url, key = start_process(settings, tmp_path, port, env)
        time.sleep(RUN_AFTER_RESTART_SECONDS)
        for job_id in job_ids:
            _api(url, key, "POST", f"/jobs/{job_id}/pause")
        time.sleep(2)  # the last runs, sent before the pause, are answered and recorded
    finally:
        stop_process(process, signal.SIGTERM)
        target.close()

    delivered = Counter(r["headers"]["Tickwork-Run-Id"] for r in target.requests)
    slots = {r["headers"]["Tickwork-Run-Id"]: parse_rfc3339(r["headers"]["Tickwork-Scheduled-For"])
             for r in target.requests}
    with psycopg.connect(settings.database_url) as conn:
        rows = conn.execute("SELECT id::text, job_id::text, scheduled_for, status FROM executions"
                            " WHERE trigger = 'schedule'").fetchall()
    runs = {run_id: (job_id, at, status) for run_id, job_id, at, status in rows}

    def in_crash_window(at: datetime) -> bool:
        return killed_at - CRASH_WINDOW_BEFORE <= at <= killed_at + CRASH_WINDOW_AFTER

    twice = {run_id: n for run_id, n in delivered.items() if n > 1}
    outside = {run_id: n for run_id, n in twice.items() if not in_crash_window(slots[run_id])}
    print(f"\n{sum(delivered.values())} deliveries of {len(delivered)} runs, {len(rows)} slots recorded;"
          f" delivered more than once: {len(twice)} in all, {len(outside)} outside the crash window")
    assert outside == {}
    assert set(delivered) <= set(runs)
    assert all(delivered[run_id] == 1 for run_id, (_, at, status) in runs.items()
               if status == "succeeded" and not in_crash_window(at))
    for job_id in job_ids:
        seconds = sorted(at for _, (job, at, _) in runs.items() if job == job_id)
        assert len(seconds) >= RUN_BEFORE_FLUSH_SECONDS + RUN_BEFORE_KILL_SECONDS, job_id
        gaps = [(a, b) for a, b in zip(seconds, seconds[1:]) if b - a != timedelta(seconds=1)]
        assert gaps == [], (job_id, gaps)
