"""The local runtime end to end: real HTTP in, real HTTP out, real PostgreSQL and Redis, the wall clock.

These tests wait on whole seconds, so they are marked slow.
"""
from __future__ import annotations

import json
import signal
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.conftest import Target
from tests.integration.helpers import free_port, start_process, stop_process
from tests.support import wait_for
from tickwork.schedule import hashing
from tickwork.settings import Settings
from tickwork.timeutil import parse_rfc3339
from tickwork_local.runtime import LocalRuntime

pytestmark = [pytest.mark.slow, pytest.mark.realtime]

RUNTIME_THREAD_PREFIXES = ("tickwork-ticker", "tickwork-maintenance", "tickwork-api", "executor")
# Waits for what the runtime does on its own: three 2 s slots take 6 s at most on an idle machine.
WAIT_SECONDS = 20.0
# A run is sent within milliseconds of its slot (see docs/benchmarks.md); later than this is a defect.
LATE_SECONDS = 1.0


@pytest.fixture
def runtime(settings: Settings) -> Iterator[LocalRuntime]:
    local = LocalRuntime(settings, port=0)
    local.start()
    yield local
    local.stop()


def call(runtime: LocalRuntime, method: str, path: str, body: Any = None, key: str | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(
        runtime.api_url + path, method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key or runtime.api_key}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def runtime_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(RUNTIME_THREAD_PREFIXES)]


def test_a_job_fires_on_its_even_seconds_and_lists_its_executions(runtime: LocalRuntime, target: Target) -> None:
    status, job = call(runtime, "POST", "/jobs", {
        "name": "every-two-seconds",
        "schedule": "*/2 * * * * *",
        "request": {"method": "POST", "url": target.url + "/hook", "body": '{"hello": 1}'},
    })
    assert status == 201, job

    assert wait_for(lambda: len(target.requests) >= 3, timeout=WAIT_SECONDS), target.requests

    arrivals = [(r["at"], r["headers"].get("Tickwork-Scheduled-For", "")) for r in target.requests]
    for arrival, slot in arrivals:
        scheduled = parse_rfc3339(slot).timestamp()
        assert scheduled % 2 == 0, f"{slot} is not an even second"
        assert 0 <= arrival - scheduled < LATE_SECONDS, f"arrived {arrival - scheduled:.3f}s after its slot {slot}"
    slots = [slot for _, slot in arrivals]
    assert len(set(slots)) == len(slots), "a slot was delivered twice"

    executions = wait_for_finished_executions(runtime, job["id"], slots)
    assert {e["scheduled_for"] for e in executions} == set(slots)
    for execution in executions:
        assert (execution["status"], execution["attempt_count"]) == ("succeeded", 1)
        status, detail = call(runtime, "GET", f"/executions/{execution['id']}")
        assert status == 200, detail
        assert [(a["number"], a["status_code"]) for a in detail["attempts"]] == [(1, 200)]


def wait_for_finished_executions(runtime: LocalRuntime, job_id: str, slots: list[str]) -> list[dict[str, Any]]:
    """The executions of `slots`, once finished: the executor records an attempt just after the target answered."""
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        status, page = call(runtime, "GET", f"/jobs/{job_id}/executions")
        assert status == 200, page
        finished = [e for e in page["items"] if e["scheduled_for"] in slots and e["finished_at"]]
        if len(finished) == len(slots) or time.monotonic() > deadline:
            return finished
        time.sleep(0.05)


def test_stop_ends_every_runtime_thread(settings: Settings) -> None:
    local = LocalRuntime(settings, port=0)
    local.start()
    assert {"tickwork-ticker", "tickwork-maintenance", "tickwork-api"} <= set(runtime_threads())

    local.stop()

    assert runtime_threads() == []


def test_requests_without_the_key_are_refused(runtime: LocalRuntime) -> None:
    status, _ = call(runtime, "GET", "/jobs", key="tw_not-a-key")

    assert status == 401


def test_the_command_serves_keeps_its_key_and_exits_cleanly(settings: Settings, tmp_path: Path) -> None:
    port = free_port()
    process, url, key = start_process(settings, tmp_path, port)
    request = urllib.request.Request(f"{url}/jobs", headers={"Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200
    assert stop_process(process, signal.SIGINT) == 0

    key_file = tmp_path / "dev-api-key"
    assert key_file.read_text().strip() == key
    assert key_file.stat().st_mode & 0o777 == 0o600

    process, _, key_again = start_process(settings, tmp_path, port)
    assert stop_process(process, signal.SIGTERM) == 0
    assert key_again == key


def test_a_spread_job_is_sent_at_its_shifted_second(runtime: LocalRuntime, target: Target) -> None:
    """spread_seconds end to end: the target receives each run at the slot moved by the job's own offset."""
    job, offset = spread_job(runtime, target, spread_seconds=4)
    status, detail = call(runtime, "GET", f"/jobs/{job['id']}")
    assert status == 200 and all(parse_rfc3339(t).timestamp() % 5 == offset for t in detail["next_fire_times"])

    path = f"/hook/{job['name']}"  # the jobs given up on (offset 0) were sent elsewhere
    assert wait_for(lambda: len([r for r in target.requests if r["path"] == path]) >= 2, timeout=WAIT_SECONDS)
    for request in [r for r in target.requests if r["path"] == path]:
        slot = request["headers"].get("Tickwork-Scheduled-For", "")
        scheduled = parse_rfc3339(slot).timestamp()
        assert scheduled % 5 == offset, f"{slot} is not {offset} s past a multiple of 5 s"
        assert 0 <= request["at"] - scheduled < LATE_SECONDS, f"arrived {request['at'] - scheduled:.3f}s after {slot}"


def spread_job(runtime: LocalRuntime, target: Target, spread_seconds: int) -> tuple[dict[str, Any], int]:
    """A job every 5 s whose offset (from its id, which the API picks) is not 0, so the shift shows."""
    for attempt in range(20):
        status, job = call(runtime, "POST", "/jobs", {
            "name": f"spread-{attempt}", "schedule": "*/5 * * * * *", "spread_seconds": spread_seconds,
            "request": {"method": "POST", "url": f"{target.url}/hook/spread-{attempt}"},
        })
        assert status == 201, job
        offset = hashing.spread_offset_seconds(job["id"], spread_seconds)
        if offset:
            return job, offset
        assert call(runtime, "DELETE", f"/jobs/{job['id']}")[0] == 204
    raise AssertionError("20 job ids in a row with offset 0")
