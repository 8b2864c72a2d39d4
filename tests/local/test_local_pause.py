"""A pause stops the runs already handed over, end to end on the local runtime (issue 33, item 5): a
`*/2 * * * * *` job to a real target, paused over the API at a few offsets before one of its slots (the
poller hands a slot over 1.5 s ahead of it), on the wall clock; then resumed. Marked slow.
"""
from __future__ import annotations

import math
import time
from typing import Any

import pytest

from tests.conftest import Target
from tests.local.test_local_runtime import call, runtime  # noqa: F401 (runtime: a fixture, found by name)
from tests.support import wait_for
from tickwork.timeutil import parse_rfc3339
from tickwork_local.runtime import LocalRuntime

pytestmark = pytest.mark.slow

OFFSETS = (0.26, 0.46, 1.46)  # seconds before a slot
# A pause whose API call had not returned before its slot (a loaded machine) proves nothing: the next even
# slot is tried, up to this many times.
TRIES = 4
WAIT_SECONDS = 20.0


def slots_sent(target: Target) -> set[float]:
    return {parse_rfc3339(r["headers"]["Tickwork-Scheduled-For"]).timestamp() for r in target.requests}


def execution_of(runtime: LocalRuntime, job_id: str, slot: float) -> dict[str, Any] | None:
    status, page = call(runtime, "GET", f"/jobs/{job_id}/executions")
    assert status == 200, page
    return next((e for e in page["items"] if parse_rfc3339(e["scheduled_for"]).timestamp() == slot), None)


def paused_before(runtime: LocalRuntime, job_id: str, offset: float) -> tuple[float, float]:
    """Pause the job `offset` s before its next even slot far enough ahead; returns (the slot, when the
    pause call returned)."""
    slot = 2 * math.ceil((time.time() + offset + 0.3) / 2)
    time.sleep(max(0.0, slot - offset - time.time()))
    status, body = call(runtime, "POST", f"/jobs/{job_id}/pause")
    assert status == 200, body
    return slot, time.time()


@pytest.mark.parametrize("offset", OFFSETS)
def test_a_job_paused_before_its_slot_does_not_send_it(runtime: LocalRuntime, target: Target, offset: float) -> None:
    status, job = call(runtime, "POST", "/jobs", {"name": "every-two-seconds", "schedule": "*/2 * * * * *",
                                                  "request": {"method": "POST", "url": target.url + "/hook"}})
    assert status == 201, job
    assert wait_for(lambda: len(target.requests) >= 1, timeout=WAIT_SECONDS)  # it runs
    for _ in range(TRIES):
        slot, returned = paused_before(runtime, job["id"], offset)
        if returned < slot:
            break
        call(runtime, "POST", f"/jobs/{job['id']}/resume")
    else:
        pytest.fail(f"no pause call returned within {offset} s of a slot in {TRIES} tries: the machine is too slow")
    time.sleep(max(0.0, slot + 1.0 - time.time()))
    assert slot not in slots_sent(target)
    skipped = execution_of(runtime, job["id"], slot)
    assert skipped is not None and skipped["status"] == "skipped", skipped
    assert skipped["last_error"].startswith("skipped: the job was paused"), skipped
    status, _ = call(runtime, "POST", f"/jobs/{job['id']}/resume")
    assert status == 200
    sent_before = len(target.requests)
    assert wait_for(lambda: len(target.requests) > sent_before, timeout=WAIT_SECONDS)  # it runs again


def test_a_job_paused_just_after_its_slot_was_sent_keeps_that_run(runtime: LocalRuntime, target: Target) -> None:
    status, job = call(runtime, "POST", "/jobs", {"name": "every-two-seconds", "schedule": "*/2 * * * * *",
                                                  "request": {"method": "POST", "url": target.url + "/hook"}})
    assert status == 201, job
    assert wait_for(lambda: len(target.requests) >= 1, timeout=WAIT_SECONDS)
    slot = max(slots_sent(target))
    status, _ = call(runtime, "POST", f"/jobs/{job['id']}/pause")
    assert status == 200
    assert wait_for(lambda: (execution_of(runtime, job["id"], slot) or {}).get("status") == "succeeded",
                    timeout=WAIT_SECONDS, interval=0.2)
