"""A job's calendar end to end on the local runtime, with a real target and the wall clock (the runtime's
clock cannot be pinned: the calendar is made of the dates the next slots fall on, whatever today is).

Marked slow: it waits on whole seconds, and on the poller's calendar cache (20 s) for a change to count."""
from __future__ import annotations

import time

import pytest

from tests.conftest import Target
from tests.local.test_local_runtime import call, runtime  # noqa: F401 - the runtime fixture
from tests.support import wait_for
from tickwork.dispatch.calendars import REFRESH_SECONDS
from tickwork_local.runtime import LocalRuntime

pytestmark = pytest.mark.slow

WAIT_SECONDS = 20.0


def test_slots_on_excluded_dates_are_skipped_and_a_freed_date_runs_again(runtime: LocalRuntime,  # noqa: F811
                                                                         target: Target) -> None:
    _, preview = call(runtime, "POST", "/schedules/preview", {"schedule": "*/2 * * * * *", "count": 100})
    days = sorted({t["utc"][:10] for t in preview["fire_times"]})  # today (and tomorrow, near midnight)
    assert call(runtime, "PUT", "/calendars/days-off", {"dates": days})[0] == 201
    status, job = call(runtime, "POST", "/jobs", {
        "name": "not-today", "schedule": "*/2 * * * * *", "calendar": {"exclude": ["days-off"]},
        "request": {"method": "POST", "url": target.url + "/excluded", "body": "{}"}})
    assert status == 201, job
    status, control = call(runtime, "POST", "/jobs", {
        "name": "every-day", "schedule": "*/2 * * * * *",
        "request": {"method": "POST", "url": target.url + "/control", "body": "{}"}})
    assert status == 201, control

    def skipped() -> list[dict]:
        status, page = call(runtime, "GET", f"/jobs/{job['id']}/executions")
        time.sleep(0.2)  # within the API's rate limit
        return [e for e in page["items"] if e["status"] == "skipped"] if status == 200 else []

    assert wait_for(lambda: len(skipped()) >= 2, timeout=WAIT_SECONDS)
    first = skipped()[-1]
    assert first["last_error"] == f"skipped: {first['scheduled_for'][:10]} is excluded by calendar days-off"
    assert first["attempt_count"] == 0 and first["finished_at"] is not None
    assert any(r["path"] == "/control" for r in target.requests)
    assert not any(r["path"] == "/excluded" for r in target.requests)

    # The dates freed: the poller sees it within its cache's refresh, and the job's runs reach the target.
    assert call(runtime, "PUT", "/calendars/days-off", {"dates": ["2000-01-01"]})[0] == 200
    assert wait_for(lambda: any(r["path"] == "/excluded" for r in target.requests),
                    timeout=REFRESH_SECONDS + WAIT_SECONDS)
