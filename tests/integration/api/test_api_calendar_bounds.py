"""Calendar bombs through the API (issue 31, item 2): a PUT out of bounds is a 400 naming `ical` (or `dates.N`)
and the event, and writes nothing; a calendar stored out of bounds by the release before them is read with
that part left out, shown in `warnings` and logged with the tenant and the calendar, never a 500; `GET`'s
`upcoming` and a preview with a read-only key expand at most EXPANSION_STEPS a year, within the horizon."""
from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any

import pytest
from psycopg.types.json import Jsonb

from tests.integration.api_client import Api, job_body, use_clock
from tickwork.calendars import rules
from tickwork.calendars.bounds import EXPANSION_STEPS, HORIZON_YEARS
from tickwork.timeutil import to_ms
from tickwork.wiring import Services

# The issue's session, byte for byte.
SESSION_ICAL = ("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//x//EN\r\nBEGIN:VEVENT\r\nUID:p\r\n"
                "DTSTART;VALUE=DATE:99991231\r\nDURATION:P2D\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n")
NOW = datetime(2026, 12, 24, 12, 0, tzinfo=timezone.utc)
# As the release before the bounds compiled and stored these (no `bounds` mark): each would have raised or
# walked dateutil to the year 9999 on every expansion.
OLD_RELEASE_BOMBS = {"dates": ["2026-12-31", "9999-01-01"], "events": [
    {"start": "9999-12-31", "days": 2},
    {"start": "2026-01-01", "days": 1, "rrules": ["FREQ=WEEKLY;BYMONTH=2;BYMONTHDAY=30"] * 2000},
    {"start": "0001-01-01", "days": 1, "rrules": ["FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30"]},
    {"start": "2020-12-25", "days": 1, "rrules": ["FREQ=YEARLY"]},
]}


def ics(*events: str) -> str:
    body = "".join(f"BEGIN:VEVENT\r\nUID:{n}\r\n{e}\r\nSUMMARY:secret\r\nEND:VEVENT\r\n" for n, e in enumerate(events))
    return f"BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//tests//EN\r\n{body}END:VCALENDAR\r\n"


def stored_by_the_old_release(services: Services, tenant_id: str, name: str, compiled: dict[str, Any]) -> None:
    with services.db.connection() as conn:
        conn.execute("INSERT INTO calendars (tenant_id, name, dates, compiled) VALUES (%s, %s, %s, %s)",
                     (tenant_id, name, [], Jsonb(compiled)))


@pytest.fixture
def reader(api: Api) -> Api:
    """The same tenant with a read-only key."""
    reply = api.call("POST", "/api-keys", {"name": "reader", "scopes": ["jobs:read"]})
    assert reply.status == 201, reply.body
    return Api(api.handler, reply.body["key"], api.tenant_id, api.index)


@pytest.fixture
def expansions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The steps each calendar-year expansion walks, as they happen."""
    walked: list[int] = []
    expand = rules.Calendar._spans

    def counted(calendar: rules.Calendar, year: int) -> list[Any]:
        before = calendar.steps
        found = expand(calendar, year)
        walked.append(calendar.steps - before)
        return found

    monkeypatch.setattr(rules.Calendar, "_spans", counted)
    return walked


def test_the_issues_session_is_a_400_naming_ical_and_the_event_and_writes_nothing(api: Api) -> None:
    assert api.call("PUT", "/calendars/hol", {"dates": ["2031-01-01"]}).status == 201
    job = api.call("POST", "/jobs", job_body(name="p", schedule="* * * * * *", calendar={"exclude": ["hol"]})).body
    before = api.call("GET", "/calendars/hol").body
    reply = api.call("PUT", "/calendars/hol", {"ical": SESSION_ICAL})
    assert reply.status == 400 and reply.body["error"]["field"] == "ical"
    assert reply.body["error"]["message"] == "event 1: DTSTART outside 1970-01-01..2200-12-31"
    assert api.call("GET", "/calendars/hol").body == before  # nothing committed
    after = api.call("GET", f"/jobs/{job['id']}").body
    assert (after["status"], after["version"], after["next_run_at"]) == ("active", job["version"], job["next_run_at"])
    score, spec = api.index.job_states([job["id"]])[0]
    assert score == to_ms(datetime.fromisoformat(job["next_run_at"])) and spec is not None and "hol" in spec
    audit = api.call("GET", "/audit").body["items"]
    assert [entry["action"] for entry in audit if entry["action"].startswith("calendar")] == ["calendar.put"]


@pytest.mark.parametrize(("body", "field", "message"), [
    ({"ical": ics("DTSTART;VALUE=DATE:20260101\r\n" + "\r\n".join(["RRULE:FREQ=WEEKLY;BYMONTH=2;BYMONTHDAY=30"] * 2000))},
     "ical", "event 1: at most 10 RRULEs an event, got 2000"),
    ({"ical": ics("DTSTART;VALUE=DATE:20260101\r\nRRULE:FREQ=WEEKLY;BYMONTH=2;BYMONTHDAY=30")},
     "ical", "event 1: RRULE never matches"),
    ({"ical": ics(*["DTSTART;VALUE=DATE:20260101\r\nRRULE:FREQ=YEARLY"] * 101)}, "ical",
     "event 101: at most 100 RRULEs a calendar"),
    ({"ical": ics("DTSTART;VALUE=DATE:00010101\r\nRRULE:FREQ=DAILY")}, "ical",
     "event 1: DTSTART outside 1970-01-01..2200-12-31"),
    ({"dates": ["2026-12-25", "9999-12-31"]}, "dates.1", "must be from 1970-01-01 to 2200-12-31"),
])
def test_a_calendar_out_of_bounds_is_a_400_naming_the_field(api: Api, body: dict[str, Any], field: str,
                                                           message: str) -> None:
    reply = api.call("PUT", "/calendars/bomb", body)
    assert reply.status == 400 and reply.body["error"]["field"] == field
    assert reply.body["error"]["message"].startswith(message) and "secret" not in reply.body["error"]["message"]
    assert api.call("GET", "/calendars/bomb").status == 404


def test_a_calendar_stored_out_of_bounds_is_read_with_those_parts_left_out_and_logged(
    api: Api, reader: Api, services: Services, expansions: list[int], caplog: pytest.LogCaptureFixture,
) -> None:
    use_clock(lambda: NOW.timestamp())
    stored_by_the_old_release(services, api.tenant_id, "old", OLD_RELEASE_BOMBS)
    caplog.set_level(logging.WARNING)
    detail = reader.call("GET", "/calendars/old")
    assert detail.status == 200
    assert detail.body["upcoming"] == ["2026-12-25", "2026-12-31", "2027-12-25", "2028-12-25", "2029-12-25",
                                       "2030-12-25"]
    assert detail.body["warnings"][:3] == ["dates.1: must be from 1970-01-01 to 2200-12-31; left out",
                                           "event 1: DTSTART outside 1970-01-01..2200-12-31; left out",
                                           "event 2: at most 10 RRULEs an event, got 2000; left out"]
    assert "event 3: DTSTART outside 1970-01-01..2200-12-31; left out" in detail.body["warnings"]
    logged = [r for r in caplog.records if r.getMessage().startswith("calendar holds what is out of bounds")]
    assert logged and {(r.tenant_id, r.calendar) for r in logged} == {(api.tenant_id, "old")}  # type: ignore[attr-defined]
    preview = reader.call("POST", "/schedules/preview", {"schedule": "0 9 * * *", "timezone": "UTC", "count": 3,
                                                       "after": "2026-12-24T12:00:00Z", "calendar": {"exclude": ["old"]}})
    assert preview.status == 200
    assert [t.get("excluded_by") for t in preview.body["fire_times"]] == ["old", None, None]
    job = api.call("POST", "/jobs", job_body(schedule="0 9 * * *", timezone="UTC", calendar={"exclude": ["old"]}))
    assert job.status == 201 and job.body["next_fire_times"][0] == "2026-12-26T09:00:00.000Z"
    assert expansions and max(expansions) <= EXPANSION_STEPS


def test_get_and_a_read_only_preview_expand_within_the_step_budget_and_the_horizon(
    api: Api, reader: Api, expansions: list[int],
) -> None:
    use_clock(lambda: NOW.timestamp())
    # At the bound: daily rules of two 135-day events walk EXPANSION_STEPS days of a leap year.
    at_bound = ics(*[f"DTSTART;VALUE=DATE:20200101\r\nDURATION:P{d}D\r\nRRULE:FREQ=DAILY" for d in (135, 135)])
    for n in range(10):
        assert api.call("PUT", f"/calendars/full-{n}", {"ical": at_bound}).status == 201
    expansions.clear()
    assert reader.call("GET", "/calendars/full-0").status == 200
    # 2026 (from the 24th: 8 dates) and 2027, then `upcoming` has its 10; neither a leap year: 2 days fewer.
    assert expansions == [EXPANSION_STEPS - 2] * 2
    expansions.clear()
    yearly = {"schedule": "0 0 9 29 2 *", "timezone": "UTC", "count": 100, "after": "2026-12-24T12:00:00Z",
              "calendar": {"exclude": [f"full-{n}" for n in range(10)], "on_excluded": "next_day"}}
    preview = reader.call("POST", "/schedules/preview", yearly)
    assert preview.status == 200 and len(preview.body["fire_times"]) == 100
    # Ten calendars, each expanded at most for its horizon's years (2025 to 2030), each year at most the budget;
    # 2028 (a leap year) to exactly the budget.
    walked = [steps for steps in expansions if steps]
    assert EXPANSION_STEPS in walked and max(walked) == EXPANSION_STEPS
    assert len(walked) <= 10 * (HORIZON_YEARS + 1) and sum(walked) <= 10 * (HORIZON_YEARS + 1) * EXPANSION_STEPS
