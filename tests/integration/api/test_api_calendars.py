"""The calendars routes and a job's `calendar`: CRUD, 400s naming the field, the 409 for deleting a calendar a job
uses, tenants that cannot see or use each other's calendars, and what calendars do to a job's next runs and to a
preview. Job times are pinned by a start_at far ahead (and a preview by `after`), so any date passes."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from tests.integration.api_client import Api, job_body, use_clock
from tickwork.scope import Scope
from tickwork.store.tenants import create_api_key, create_tenant
from tickwork.tenant import calendars
from tickwork.tenant.calendars import MAX_CALENDARS
from tickwork.wiring import Services

CHRISTMAS = ("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//tests//EN\r\nBEGIN:VEVENT\r\nUID:x\r\n"
             "DTSTART;VALUE=DATE:20201225\r\nRRULE:FREQ=YEARLY\r\nSUMMARY:Christmas\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n")
START = "2199-12-23T00:00:00Z"  # a far-away window start pins every next run, whatever today is


@pytest.fixture
def other(api: Api, db: Any) -> Api:
    tenant_id = create_tenant(db, "tenant-b")
    return Api(api.handler, create_api_key(db, tenant_id), tenant_id, api.index)


def daily_job(api: Api, calendar: dict[str, Any] | None, **fields: Any) -> Any:
    body = job_body(schedule="0 9 * * *", timezone="UTC", start_at=START, calendar=calendar, **fields)
    return api.call("POST", "/jobs", body)


def test_put_creates_then_replaces_get_lists_and_delete_removes(api: Api) -> None:
    created = api.call("PUT", "/calendars/us-holidays", {"dates": ["2026-07-04", "2026-01-01"], "ical": CHRISTMAS})
    replaced = api.call("PUT", "/calendars/us-holidays", {"dates": ["2026-07-04"]})
    assert (created.status, replaced.status) == (201, 200)
    assert created.body["dates"] == ["2026-01-01", "2026-07-04"] and created.body["events"] == 1
    assert created.body["ical"] == CHRISTMAS
    assert (replaced.body["dates"], replaced.body["ical"], replaced.body["events"]) == (["2026-07-04"], None, 0)
    assert replaced.body["created_at"] == created.body["created_at"]
    listed = api.call("GET", "/calendars").body["items"]
    assert [(c["name"], c["dates"], c["events"]) for c in listed] == [("us-holidays", 1, 0)]
    assert api.call("GET", "/calendars/us-holidays").body == replaced.body
    assert api.call("DELETE", "/calendars/us-holidays").status == 204
    assert api.call("GET", "/calendars/us-holidays").status == 404
    assert api.call("DELETE", "/calendars/us-holidays").status == 404


@pytest.mark.parametrize(("body", "field", "message"), [
    ({"dates": ["2026-01-01", "2026-01-02", "2026-01-03", "2026-02-30"]}, "dates.3", "YYYY-MM-DD"),
    ({"dates": ["26-01-01"]}, "dates.0", "YYYY-MM-DD"),
    ({"dates": ["2026-01-01"] * 1001}, "dates", "at most 1000"),
    ({}, "dates", "give dates, ical or both"),
    ({"ical": "BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nDTSTART:20261225T090000Z\r\nEND:VEVENT\r\nEND:VCALENDAR"},
     "ical", "event 1: not an all-day event"),
    ({"ical": "hello"}, "ical", "not an iCalendar file"),
    ({"ical": CHRISTMAS.replace("FREQ=YEARLY", "FREQ=YEARLY;BYMONTH=13")}, "ical", "BYMONTH must be in 1-12"),
    ({"dates": [], "colour": "red"}, "colour", "unknown field"),
])
def test_a_bad_calendar_is_a_400_naming_the_field(api: Api, body: dict[str, Any], field: str, message: str) -> None:
    reply = api.call("PUT", "/calendars/bad", body)
    assert reply.status == 400 and reply.body["error"]["field"] == field and message in reply.body["error"]["message"]
    assert api.call("GET", "/calendars/bad").status == 404


def test_a_bad_name_is_a_400_and_a_tenant_has_at_most_100(api: Api, services: Services) -> None:
    reply = api.call("PUT", "/calendars/no%20spaces", {"dates": []})
    assert reply.status == 400 and reply.body["error"]["field"] == "name"
    scope = Scope(services.db, api.index, services.settings, api.tenant_id, datetime.now(timezone.utc))
    for n in range(MAX_CALENDARS):  # past the API's rate limit: straight through the service
        calendars.put_calendar(scope, f"c{n}", [], None)
    over = api.call("PUT", "/calendars/one-more", {"dates": []})
    assert over.status == 409 and over.body["error"]["field"] == "name"
    assert api.call("PUT", "/calendars/c0", {"dates": ["2026-01-01"]}).status == 200  # replacing still works


def test_a_job_names_calendars_that_exist_and_a_used_calendar_cannot_be_deleted(api: Api) -> None:
    api.call("PUT", "/calendars/us", {"dates": ["2199-12-25"]})
    missing = daily_job(api, {"exclude": ["us", "uk"]})
    assert missing.status == 400 and missing.body["error"]["field"] == "calendar.exclude.1"
    bad_mode = daily_job(api, {"exclude": ["us"], "on_excluded": "later"})
    assert bad_mode.status == 400 and bad_mode.body["error"]["field"] == "calendar.on_excluded"
    job = daily_job(api, {"exclude": ["us"]}).body
    assert job["calendar"] == {"exclude": ["us"], "on_excluded": "skip"}
    refused = api.call("DELETE", "/calendars/us")
    assert refused.status == 409 and job["id"] in refused.body["error"]["message"]
    patched = api.call("PATCH", f"/jobs/{job['id']}", {"calendar": None})
    assert patched.status == 200 and patched.body["calendar"] is None and patched.body["version"] == job["version"] + 1
    assert api.call("DELETE", "/calendars/us").status == 204


def test_skip_leaves_excluded_dates_out_of_the_next_runs(api: Api) -> None:
    api.call("PUT", "/calendars/xmas", {"dates": ["2199-12-25", "2199-12-26"]})
    job = daily_job(api, {"exclude": ["xmas"], "on_excluded": "skip"}).body
    assert job["next_run_at"] == "2199-12-23T09:00:00.000Z"
    assert [t[5:10] for t in job["next_fire_times"]] == ["12-23", "12-24", "12-27", "12-28", "12-29"]


def test_next_day_moves_runs_and_replacing_the_calendar_re_aims_the_job(api: Api) -> None:
    api.call("PUT", "/calendars/xmas", {"dates": ["2199-12-23", "2199-12-25"]})
    job = daily_job(api, {"exclude": ["xmas"], "on_excluded": "next_day"}).body
    # The 23rd moves onto the 24th and the 25th onto the 26th: each one run with the regular one there.
    assert job["next_run_at"] == "2199-12-24T09:00:00.000Z"
    assert [t[5:10] for t in job["next_fire_times"]] == ["12-24", "12-26", "12-27", "12-28", "12-29"]
    assert api.call("PUT", "/calendars/xmas", {"dates": ["2199-12-25"]}).status == 200
    again = api.call("GET", f"/jobs/{job['id']}").body
    assert again["next_run_at"] == "2199-12-23T09:00:00.000Z" and again["version"] == job["version"] + 1
    assert api.index.job_states([job["id"]])[0][0] is not None


def test_a_job_with_a_calendar_is_answered_on_as_few_connections_as_one_without(
    api: Api, services: Services, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each route answering a job with its next runs reads the job's calendars on the connection that read or
    wrote the job: no more checkouts of the pool than for a job without a calendar, and the dates still left out."""
    api.call("PUT", "/calendars/xmas", {"dates": ["2199-12-25"]})
    checkouts: list[Any] = []
    connection = services.db.connection

    def counted(*args: Any, **kwargs: Any) -> Any:
        checkouts.append(args)
        return connection(*args, **kwargs)

    monkeypatch.setattr(services.db, "connection", counted)

    def taken(method: str, path: str, body: Any = None) -> tuple[int, tuple[str, ...], str]:
        """Connections the call checked out, the next runs it answered, the job's id."""
        before = len(checkouts)
        reply = api.call(method, path, body)
        assert reply.status in (200, 201), reply.body
        return len(checkouts) - before, tuple(t[5:10] for t in reply.body["next_fire_times"]), reply.body["id"]

    def answered(key: str, calendar: dict[str, Any] | None) -> list[tuple[int, tuple[str, ...]]]:
        body = job_body(schedule="0 9 * * *", timezone="UTC", start_at=START, calendar=calendar)
        replies = [taken("PUT", f"/jobs/by-key/{key}", body), taken("POST", "/jobs", {**body, "name": f"{key} 2"})]
        path = f"/jobs/{replies[-1][2]}"
        replies += [taken("GET", f"/jobs/by-key/{key}"), taken("GET", path), taken("PATCH", path, {"description": "x"}),
                    taken("POST", f"{path}/pause"), taken("POST", f"{path}/resume")]
        return [(count, times) for count, times, _ in replies]

    plain = answered("plain", None)
    skipping = answered("skipping", {"exclude": ["xmas"], "on_excluded": "skip"})
    assert [taken for taken, _ in skipping] == [taken for taken, _ in plain]
    assert {tuple(times) for _, times in plain} == {("12-23", "12-24", "12-25", "12-26", "12-27"), ()}
    assert {tuple(times) for _, times in skipping} == {("12-23", "12-24", "12-26", "12-27", "12-28"), ()}


def test_preview_marks_skipped_and_moved_slots_and_keeps_its_shape_without_a_calendar(api: Api) -> None:
    api.call("PUT", "/calendars/xmas", {"ical": CHRISTMAS})
    body = {"schedule": "0 9 * * *", "timezone": "America/New_York", "count": 3, "after": "2026-12-24T15:00:00Z"}
    skipped = api.call("POST", "/schedules/preview", {**body, "calendar": {"exclude": ["xmas"]}}).body
    moved = api.call("POST", "/schedules/preview",
                     {**body, "calendar": {"exclude": ["xmas"], "on_excluded": "next_day"}}).body
    plain = api.call("POST", "/schedules/preview", body).body
    assert skipped["fire_times"] == [
        {"utc": "2026-12-25T14:00:00.000Z", "local": "2026-12-25T09:00:00.000-05:00", "excluded_by": "xmas"},
        {"utc": "2026-12-26T14:00:00.000Z", "local": "2026-12-26T09:00:00.000-05:00"},
        {"utc": "2026-12-27T14:00:00.000Z", "local": "2026-12-27T09:00:00.000-05:00"}]
    assert moved["fire_times"][0] == {"utc": "2026-12-26T14:00:00.000Z", "local": "2026-12-26T09:00:00.000-05:00",
                                      "moved_from": "2026-12-25T14:00:00.000Z"}
    assert [set(t) for t in plain["fire_times"]] == [{"utc", "local"}] * 3
    unknown = api.call("POST", "/schedules/preview", {**body, "calendar": {"exclude": ["nope"]}})
    assert unknown.status == 400 and unknown.body["error"]["field"] == "calendar.exclude.0"


def test_the_detail_lists_the_next_dates_from_the_apis_today_and_the_jobs_using_it(api: Api) -> None:
    use_clock(lambda: datetime(2026, 12, 24, 23, 0, tzinfo=timezone.utc).timestamp())
    created = api.call("PUT", "/calendars/xmas", {"dates": ["2026-12-20", "2027-01-01"], "ical": CHRISTMAS}).body
    # Christmas of each year up to 5 ahead (2026-2030), the explicit dates from today (the 24th, UTC) on.
    assert created["upcoming"] == ["2026-12-25", "2027-01-01", "2027-12-25", "2028-12-25", "2029-12-25", "2030-12-25"]
    assert created["used_by"] == []
    first = daily_job(api, {"exclude": ["xmas"]}, name="first").body
    use_clock(lambda: datetime(2026, 12, 24, 23, 0, 1, tzinfo=timezone.utc).timestamp())  # oldest first
    second = daily_job(api, {"exclude": ["xmas"]}, name="second").body
    detail = api.call("GET", "/calendars/xmas").body
    assert detail["used_by"] == [{"id": first["id"], "name": "first"}, {"id": second["id"], "name": "second"}]
    assert detail["upcoming"] == created["upcoming"]
    replaced = api.call("PUT", "/calendars/xmas", {"dates": ["2027-03-01"]}).body
    assert (replaced["upcoming"], [u["name"] for u in replaced["used_by"]]) == (["2027-03-01"], ["first", "second"])


def test_tenants_neither_see_nor_use_each_others_calendars(api: Api, other: Api) -> None:
    api.call("PUT", "/calendars/shared-name", {"dates": ["2199-12-25"]})
    assert other.call("GET", "/calendars/shared-name").status == 404
    assert other.call("GET", "/calendars").body == {"items": []}
    assert other.call("DELETE", "/calendars/shared-name").status == 404
    used = daily_job(other, {"exclude": ["shared-name"]})
    assert used.status == 400 and used.body["error"]["field"] == "calendar.exclude.0"
    assert other.call("PUT", "/calendars/shared-name", {"dates": ["2199-12-24"]}).status == 201
    job = daily_job(other, {"exclude": ["shared-name"]}).body
    assert [t[5:10] for t in job["next_fire_times"]][:2] == ["12-23", "12-25"]  # its own 24th, not A's 25th
    assert api.call("GET", "/calendars/shared-name").body["dates"] == ["2199-12-25"]
    assert api.call("DELETE", "/calendars/shared-name").status == 204  # B's job does not hold A's calendar
