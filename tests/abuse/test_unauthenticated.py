"""What anyone can send without a key (issue 31, item 5): forged completion callbacks carrying 6 MB each, aimed at
another tenant's run awaiting its callback. Each is a 404 answered before its body is read; the run still takes
its real callback, and the benign tenant's every-second job keeps its second meanwhile."""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.abuse.conftest import Arena, call
from tests.support import wait_for
from tickwork.rules import completion

pytestmark = [pytest.mark.slow, pytest.mark.realtime]

FORGED = 12
SIX_MB = 6 * 1024 * 1024
# A report whose output alone is 6 MB (JSON worth parsing), and 6 MB that are not JSON: read, either is a 400.
BODIES = [b'{"status": "succeeded", "output": "' + b"x" * SIX_MB + b'"}', b"{" * SIX_MB]


def test_forged_callbacks_of_6_mb_are_404s_and_the_real_one_still_ends_the_run(arena: Arena) -> None:
    status, job = arena.benign("POST", "/jobs", {
        "name": "long-export", "schedule": "0 0 0 1 1 *", "completion": {"mode": "callback", "timeout_seconds": 600},
        "request": {"method": "POST", "url": arena.target.url + "/long-export", "body": "{}"}})
    assert status == 201, job
    status, run = arena.benign("POST", f"/jobs/{job['id']}/run")
    assert status == 202, run
    assert wait_for(lambda: arena.benign("GET", f"/executions/{run['id']}")[1]["status"] == "awaiting_completion",
                    timeout=20, interval=0.2)
    url = next(r["headers"]["Tickwork-Callback-Url"] for r in arena.target.requests if r["path"] == "/long-export")
    path = url.removeprefix(arena.url)
    forged = path.rsplit("/", 1)[0] + "/" + completion.new_token()
    started = time.time()

    with ThreadPoolExecutor(max_workers=3) as pool:
        answers = list(pool.map(lambda i: call(arena.url, "POST", forged, None, raw=BODIES[i % 2], timeout=60),
                                range(FORGED)))

    print(f"{FORGED} forged callbacks of 6 MB answered in {time.time() - started:.2f} s")
    assert [status for status, _ in answers] == [404] * FORGED, answers[:2]
    assert {answer["error"]["code"] for _, answer in answers} == {"not_found"}  # not invalid_json: never parsed
    assert arena.benign("GET", f"/executions/{run['id']}")[1]["status"] == "awaiting_completion"
    status, answer = call(arena.url, "POST", path, None, {"status": "succeeded", "output": "42 rows"})
    assert (status, answer["status"]) == (200, "succeeded"), answer
    arena.assert_benign_on_time(started, max(time.time(), started + 3))  # a window of whole seconds
