"""The console's Calendars pages in Debian's Chromium against the local runtime: creating a calendar from the
form, replacing it with an iCalendar text whose yearly rule the page shows expanded, the API's 400s at the
field they name, delete with its confirmation (refused while a job uses the calendar), a read-only key, and a
phone's width.

The local runtime's clock is the wall clock, so every date is a future one counted from `today` (the UTC date,
read once per test, as the API reads it); none is within a week of it, so a test crossing midnight is unaffected.
"""
from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from typing import Any

import pytest

from tests.conftest import Target
from tests.integration.api import test_console
from tests.integration.api.test_console import HOURLY, Console, expect
from tickwork_local.runtime import LocalRuntime

pytestmark = pytest.mark.slow
runtime = test_console.runtime
browser = test_console.browser
console = test_console.console


@pytest.fixture
def today() -> date:
    return datetime.now(timezone.utc).date()


def days(start: date, *offsets: int) -> list[str]:
    return [(start + timedelta(days=n)).isoformat() for n in offsets]


def yearly(first: date, summary: str = "Founders day") -> str:
    """An iCalendar text of one all-day event on `first`'s month and day every year, from three years before."""
    start = first.replace(year=first.year - 3).strftime("%Y%m%d")
    return ("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//tests//EN\r\nBEGIN:VEVENT\r\nUID:founders\r\n"
            f"DTSTART;VALUE=DATE:{start}\r\nRRULE:FREQ=YEARLY\r\nSUMMARY:{summary}\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n")


def anniversary(today: date) -> date:
    """A month ahead, on a day every year has (a yearly rule from 29 February skips three years in four)."""
    day = today + timedelta(days=30)
    return day + timedelta(days=1) if (day.month, day.day) == (2, 29) else day


def open_calendars(console: Console) -> None:
    console.page.get_by_role("navigation", name="Main").get_by_role("link", name="Calendars").click()
    expect(console.page.get_by_role("heading", name="Calendars", exact=True)).to_be_visible()


def test_create_a_calendar_from_dates_typed_in_the_form(console: Console, today: date) -> None:
    first, second, third = days(today, 10, 20, 40)
    page = console.page
    console.sign_in()
    open_calendars(console)
    expect(page.get_by_text("No calendars yet.")).to_be_visible()
    page.get_by_role("link", name="New calendar").click()
    page.get_by_label("Name").fill("team-days-off")
    page.get_by_label("Dates (optional)").fill(f"{third}\n{first}, {second}\n")
    page.get_by_role("button", name="Create calendar").click()

    expect(page.get_by_role("heading", name="team-days-off")).to_be_visible()
    expect(page.locator(".times li time")).to_have_text([first, second, third])
    expect(page.get_by_text("No job uses it.")).to_be_visible()
    status, stored = console.api("GET", "/calendars/team-days-off")
    assert status == 200 and stored["dates"] == [first, second, third] and stored["ical"] is None
    open_calendars(console)
    row = page.locator("tbody tr").filter(has_text="team-days-off")
    expect(row.locator("td[data-label='Dates']")).to_have_text("3")
    # The form for a new calendar does not replace one of the same name.
    page.get_by_role("link", name="New calendar").click()
    page.get_by_label("Name").fill("team-days-off")
    page.get_by_label("Dates (optional)").fill(first)
    page.get_by_role("button", name="Create calendar").click()
    expect(page.locator("#c-name-error")).to_contain_text("a calendar of that name exists")
    assert console.api("GET", "/calendars/team-days-off")[1]["dates"] == [first, second, third]


def test_replace_it_with_an_icalendar_text_and_see_the_yearly_dates_expanded(console: Console, today: date) -> None:
    assert console.api("PUT", "/calendars/founders", {"dates": days(today, 10)})[0] == 201
    day = anniversary(today)
    page = console.page
    console.sign_in()
    console.open("#/calendars/founders")
    page.get_by_role("link", name="Replace").click()
    expect(page.get_by_label("Name")).to_have_value("founders")
    page.get_by_label("Dates (optional)").fill("")
    page.get_by_label("iCalendar text (optional)").fill(yearly(day, "<img src=x onerror=alert(1)>"))
    page.get_by_role("button", name="Replace calendar").click()

    expect(page.get_by_role("heading", name="founders")).to_be_visible()
    shown = [day.isoformat(), day.replace(year=day.year + 1).isoformat(), day.replace(year=day.year + 2).isoformat()]
    expect(page.locator(".times li time").first).to_have_text(shown[0])
    assert page.locator(".times li time").all_text_contents()[:3] == shown
    expect(page.locator(".settings")).to_contain_text("1 event(s)")
    status, stored = console.api("GET", "/calendars/founders")
    assert status == 200 and stored["dates"] == [] and stored["events"] == 1 and stored["upcoming"][:3] == shown
    assert page.locator("#main img").count() == 0 and console.dialogs == []


def test_the_apis_400_is_shown_at_the_field_it_names_and_nothing_is_stored(console: Console, today: date) -> None:
    first, second = days(today, 10, 11)
    impossible = f"{today.year + 1}-02-30"
    page = console.page
    console.sign_in()
    console.open("#/new-calendar")
    page.get_by_label("Name").fill("typo")
    dates = page.get_by_label("Dates (optional)")
    dates.fill(f"{first}\n{second}\n{impossible}")
    page.get_by_role("button", name="Create calendar").click()

    expect(page.locator("#c-dates-error")).to_have_text(
        f'dates.2 ("{impossible}"): must be a date as YYYY-MM-DD (a day that exists)')
    expect(dates).to_have_attribute("aria-invalid", "true")
    assert console.api("GET", "/calendars/typo")[0] == 404

    dates.fill("")
    page.get_by_label("iCalendar text (optional)").fill("hello")
    page.get_by_role("button", name="Create calendar").click()
    expect(page.locator("#c-ical-error")).to_contain_text("ical: not an iCalendar file")
    expect(page.locator("#c-dates-error")).to_be_hidden()
    assert console.api("GET", "/calendars/typo")[0] == 404


def test_delete_of_a_calendar_a_job_uses_is_refused_with_a_clear_message(console: Console, target: Target,
                                                                          today: date) -> None:
    assert console.api("PUT", "/calendars/held", {"dates": days(today, 10)})[0] == 201
    job = console.job(name="payroll", schedule=HOURLY, request={"url": target.url + "/p"},
                      calendar={"exclude": ["held"]})
    page = console.page
    console.sign_in()
    open_calendars(console)
    page.get_by_role("link", name="held").click()
    expect(page.get_by_role("link", name="payroll")).to_have_attribute("href", f"#/jobs/{job['id']}")
    page.get_by_role("button", name="Delete", exact=True).click()
    page.get_by_role("dialog").get_by_role("button", name="Delete calendar").click()

    notice = page.locator(".notice")
    expect(notice).to_contain_text("Not deleted: it is in use.")
    expect(notice).to_contain_text(f"{job['id']} (payroll)")
    expect(page.get_by_role("heading", name="held")).to_be_visible()
    assert console.api("GET", "/calendars/held")[0] == 200


def test_delete_of_an_unused_calendar_asks_first_and_removes_it(console: Console, today: date) -> None:
    assert console.api("PUT", "/calendars/spare", {"dates": days(today, 10)})[0] == 201
    page = console.page
    console.sign_in()
    console.open("#/calendars/spare")
    delete = page.get_by_role("button", name="Delete", exact=True)
    delete.click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    assert console.api("GET", "/calendars/spare")[0] == 200

    delete.click()
    dialog.get_by_role("button", name="Delete calendar").click()
    expect(page.get_by_text("No calendars yet.")).to_be_visible()
    assert console.api("GET", "/calendars/spare")[0] == 404


def test_a_read_only_key_sees_the_calendars_but_cannot_create_replace_or_delete(console: Console, today: date) -> None:
    assert console.api("PUT", "/calendars/holidays", {"dates": days(today, 10)})[0] == 201
    status, reader = console.api("POST", "/api-keys", {"name": "viewer", "scopes": ["jobs:read"]})
    assert status == 201
    page = console.page
    console.sign_in(reader["key"])
    open_calendars(console)
    expect(page.get_by_role("link", name="New calendar")).to_have_count(0)
    page.get_by_role("link", name="holidays").click()
    expect(page.locator(".times li time")).to_have_text(days(today, 10))
    expect(page.get_by_role("button", name="Delete")).to_have_count(0)
    expect(page.get_by_role("link", name="Replace")).to_have_count(0)
    console.open("#/new-calendar")  # typed by hand: the form is not offered
    expect(page.get_by_role("heading", name="Read only")).to_be_visible()
    expect(page.get_by_label("Name")).to_have_count(0)


def test_phone_width_calendar_pages_have_no_horizontal_scroll(browser: Any, runtime: LocalRuntime, today: date) -> None:
    phone = Console(browser, runtime, width=375, height=740)
    try:
        long_name = "a-long-calendar-name-that-must-wrap-" + "x" * 27
        assert phone.api("PUT", f"/calendars/{long_name}", {"ical": yearly(anniversary(today), "y" * 300)})[0] == 201
        page = phone.page
        phone.sign_in()
        open_calendars(phone)
        widths = {"list": page.evaluate("document.documentElement.scrollWidth")}
        page.get_by_role("link", name=long_name).click()
        expect(page.locator(".times li").first).to_be_visible()
        page.locator("details summary").click()
        widths["calendar"] = page.evaluate("document.documentElement.scrollWidth")
        page.get_by_role("link", name="Replace").click()
        expect(page.get_by_label("iCalendar text (optional)")).not_to_be_empty()
        widths["form"] = page.evaluate("document.documentElement.scrollWidth")

        assert widths == {page_name: 375 for page_name in widths}
    finally:
        phone.close()
