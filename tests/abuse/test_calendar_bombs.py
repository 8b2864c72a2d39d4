"""Calendars a tenant can send that once cost minutes of CPU in the API and the poller (issue 31, item 2): each is
refused with a 400 naming `ical` and the event, before anything is written, while the benign tenant's job keeps its
second."""
from __future__ import annotations

import time

import pytest

from tests.abuse.conftest import Arena

pytestmark = [pytest.mark.slow, pytest.mark.realtime]


def _ical(*event_lines: str) -> str:
    body = "\r\n".join(event_lines)
    return (f"BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//x//EN\r\nBEGIN:VEVENT\r\nUID:bomb\r\n{body}\r\n"
            "END:VEVENT\r\nEND:VCALENDAR\r\n")


BOMBS = {
    "year 1": _ical("DTSTART;VALUE=DATE:00010101", "RRULE:FREQ=YEARLY"),
    "year 9999": _ical("DTSTART;VALUE=DATE:99991230"),
    "2,000 rules in one event": _ical("DTSTART;VALUE=DATE:20260101",
                                      *[f"RRULE:FREQ=YEARLY;BYMONTH={1 + i % 12};BYMONTHDAY={1 + i % 28}"
                                        for i in range(2000)]),
    "a rule that never matches": _ical("DTSTART;VALUE=DATE:20260101", "RRULE:FREQ=WEEKLY;BYMONTH=2;BYMONTHDAY=30"),
    "30 February, yearly": _ical("DTSTART;VALUE=DATE:20260101", "RRULE:FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30"),
}


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_a_calendar_bomb_is_refused_naming_ical_and_nothing_is_written(arena: Arena, name: str) -> None:
    started = time.time()
    calendar = "bomb-" + "".join(c if c.isalnum() else "-" for c in name)

    status, answer = arena.hostile("PUT", f"/calendars/{calendar}", {"ical": BOMBS[name]})

    assert status == 400, answer
    assert answer["error"]["field"] == "ical" and "event 1" in answer["error"]["message"], answer
    assert arena.hostile("GET", f"/calendars/{calendar}")[0] == 404
    arena.assert_benign_on_time(started)
