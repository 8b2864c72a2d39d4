"""One tenant's input never stops another's schedules (issue 31, item 1 and the acceptance session).

The session the issue reported, as the hostile tenant sends it: a calendar that a job names, replaced by an
iCalendar event at the end of year 9999. Then the runtime stalls for 10 s (a deploy, a Redis failover, one slow
tick): the stall puts every job's next slot behind the tick, in the backlog, where a poisoned entry at the head
used to stop every tenant's jobs for good."""
from __future__ import annotations

import time
from datetime import datetime, timezone

import pytest

from tests.abuse.conftest import Arena
from tests.support import wait_for
from tickwork.store import calendars as calendars_store
from tickwork.store.calendars import CalendarRow

pytestmark = [pytest.mark.slow, pytest.mark.realtime]

STALL_SECONDS = 10.0
BOMB = ("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//x//EN\r\nBEGIN:VEVENT\r\nUID:p\r\n"
        "DTSTART;VALUE=DATE:99991231\r\nDURATION:P2D\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n")


def _hostile_job(arena: Arena, calendar: str, path: str) -> dict:
    status, job = arena.hostile("POST", "/jobs", {
        "name": path.strip("/"), "schedule": "* * * * * *", "calendar": {"exclude": [calendar]},
        "request": {"method": "POST", "url": arena.target.url + path, "body": "{}"}})
    assert status == 201, job
    return job


def _sent_to(arena: Arena, path: str, since: float) -> int:
    return sum(1 for r in list(arena.target.requests) if r["path"] == path and r["at"] > since)


def _stall_and_check(arena: Arena) -> None:
    """Stall the loop; once it ticks again, the benign job's slots are sent on time from the next second on."""
    arena.runtime.hold_ticks(STALL_SECONDS)
    resumed = time.time() + STALL_SECONDS
    time.sleep(STALL_SECONDS + 1.0)
    arena.assert_benign_on_time(resumed + 1.0, resumed + 8.0)


def test_the_reported_session_answers_400_naming_ical_and_nothing_stops(arena: Arena) -> None:
    assert arena.hostile("PUT", "/calendars/hol", {"dates": ["2031-01-01"]})[0] == 201
    _hostile_job(arena, "hol", "/hostile/p")
    started = time.time()

    status, answer = arena.hostile("PUT", "/calendars/hol", {"ical": BOMB})

    assert status == 400, answer
    assert answer["error"]["field"] == "ical" and "event 1" in answer["error"]["message"], answer
    status, stored = arena.hostile("GET", "/calendars/hol")
    assert status == 200 and stored["dates"] == ["2031-01-01"] and not stored.get("ical"), stored  # nothing committed
    assert wait_for(lambda: _sent_to(arena, "/hostile/p", started) >= 2, timeout=10, interval=0.2)
    arena.assert_benign_on_time(started)

    _stall_and_check(arena)
    assert _sent_to(arena, "/hostile/p", time.time() - 3) >= 1  # its own job runs again too


def test_a_calendar_stored_out_of_bounds_is_read_tolerantly_and_nothing_stops(arena: Arena) -> None:
    """Stored by a release that did not refuse it (the event at the end of year 9999): the poller reads the
    calendar without what is out of bounds, the job goes on, and the calendar's GET says what was left out."""
    assert arena.hostile("PUT", "/calendars/stored-bomb", {"dates": ["2031-01-01"]})[0] == 201
    _hostile_job(arena, "stored-bomb", "/hostile/q")
    now = datetime.now(timezone.utc)
    bomb = CalendarRow("stored-bomb", [], BOMB, {"dates": [], "events": [{"start": "9999-12-31", "days": 2}]},
                       now, now)
    assert arena.runtime._services is not None
    with arena.runtime._services.db.connection() as conn:
        calendars_store.put(conn, arena.hostile_tenant, bomb)
    arena.assert_benign_on_time(time.time())

    _stall_and_check(arena)

    assert _sent_to(arena, "/hostile/q", time.time() - 3) >= 1  # its own job runs on
    status, shown = arena.hostile("GET", "/calendars/stored-bomb")
    assert status == 200 and shown["warnings"], shown
