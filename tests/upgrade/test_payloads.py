"""What one release writes and the other reads, checked both ways between the baseline (its own venv,
tests/upgrade/baseline.py) and this tree: the executor's event (in AWS, during an update, the old poller's
invokes reach the new executor and Lambda retries old events into new code), the due index's members and
its job specs (written by one release's API or poller, claimed by the other's). tests/upgrade/probe.py runs
under each release's interpreter; the two answers must agree.

Notification payloads and callback tokens live in Postgres and in URLs: test_mixed_versions.py crosses
them live (a notification one release wrote, delivered by the other; a token one made, checked by the other).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.upgrade.baseline import build

pytestmark = pytest.mark.upgrade

PROBE = Path(__file__).with_name("probe.py")
TENANT = "5f0c2a39-9d6e-4a53-8f33-0d1f5f7e2b11"
RUN = "4db39318-7882-4a12-b293-e84f4f2b999f"
DISPATCHES = [
    {"execution_id": RUN, "attempt": 1, "fire_at_ms": 1_796_000_000_000, "tenant_id": TENANT},
    {"execution_id": RUN, "attempt": 3, "fire_at_ms": 1_796_000_000_250},
    {"execution_id": "2b0f8c1e-2d3c-4bb3-9c55-1e1d5b5e4a10", "attempt": 2, "fire_at_ms": 1_796_000_001_000,
     "kind": "notification"},
    {"execution_id": RUN, "attempt": 1, "fire_at_ms": 1_796_000_060_000, "kind": "completion", "tenant_id": TENANT},
]
# Every kind of schedule a spec carries: seconds, zones across a DST change (Europe's is 2027-03-28), rates
# anchored on a start, one-off times, H and spread (from the job's id), windows.
SCHEDULES = [
    ("* * * * * *", "UTC", None, None, None, 0), ("*/15 * * * * *", "UTC", None, None, None, 0),
    ("0 30 2 * * *", "Europe/Berlin", None, None, None, 0),
    ("30 9 * * mon-fri", "America/New_York", None, None, None, 0),
    ("rate(45 seconds)", "UTC", "2027-03-27T00:00:07+00:00", None, None, 0),
    ("at(2027-03-28T02:30)", "Europe/Berlin", None, None, None, 0), ("H H * * *", "UTC", None, None, None, 0),
    ("*/10 * * * * *", "UTC", None, "2027-03-27T00:05:00+00:00", "2027-03-27T00:09:00+00:00", 7),
    ("every weekday at 17:00", "Asia/Tokyo", None, None, None, 600),
]
AFTER_MS = 1_806_105_600_000  # 2027-03-27T00:00:00Z


def probe(python: Path | str, request: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run([str(python), str(PROBE)], input=json.dumps(request), capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def releases() -> dict[str, str]:
    return {"baseline": str(build().python), "this tree": sys.executable}


def test_executor_events_read_the_same_both_ways(releases: dict[str, str]) -> None:
    made = {name: probe(python, {"make_events": DISPATCHES})["make_events"] for name, python in releases.items()}
    read = {name: probe(python, {"parse_events": list(made.values())})["parse_events"]
            for name, python in releases.items()}
    # The baseline reads what either writes as written; this tree reads the baseline's as written (a field one
    # release adds, the other ignores: it never changes what the other reads).
    assert read["baseline"] == [DISPATCHES, DISPATCHES]
    assert read["this tree"][0] == DISPATCHES


def test_due_index_members_are_spelled_alike(releases: dict[str, str]) -> None:
    ids = {"job": RUN, "run": [RUN, 2], "notification": [RUN, 1], "completion": [RUN, 4]}
    spelled = [probe(python, {"members": ids})["members"] for python in releases.values()]
    assert spelled[0] == spelled[1]


def test_job_specs_one_release_writes_give_the_same_slots_in_the_other(releases: dict[str, str]) -> None:
    schedules = [{"schedule": expression, "timezone": zone, "anchor": anchor, "start_at": start, "end_at": end,
                  "spread_seconds": spread, "id": f"0b7c5e0e-6c53-4f2e-9d8a-{n:012d}", "version": 3,
                  "catchup_window_seconds": 300, "catchup": "latest", "tenant_id": TENANT}
                 for n, (expression, zone, anchor, start, end, spread) in enumerate(SCHEDULES)]
    specs = {name: probe(python, {"make_specs": schedules})["make_specs"] for name, python in releases.items()}
    request = {"next_slots": {"specs": specs["baseline"] + specs["this tree"], "after_ms": AFTER_MS, "count": 40}}
    slots = {name: probe(python, request)["next_slots"] for name, python in releases.items()}
    half = len(SCHEDULES)
    assert slots["baseline"] == slots["this tree"]  # each spec read alike by both releases
    assert slots["baseline"][:half] == slots["baseline"][half:]  # and the same job's spec alike from either
    assert all(any(slot is not None for slot in found) for found in slots["baseline"])
