"""The console's job form in a real browser (Debian's Chromium): what a field set in the form is stored as
(GET /jobs/{id}) and shown as on the job page, and the API's 400 shown at the field it names.

Same runtime, browser and tab as tests/integration/api/test_console.py; every wait is on a condition.
"""
from __future__ import annotations

import re
from typing import Any

import pytest

from tests.conftest import Target
from tests.integration.api import test_console
from tests.integration.api.test_console import HOURLY, Console, expect

pytestmark = test_console.pytestmark
runtime = test_console.runtime
browser = test_console.browser
console = test_console.console

CALLBACK_600 = {"mode": "callback", "timeout_seconds": 600}
RESPONSE = {"mode": "response", "timeout_seconds": None}  # how GET /jobs/{id} shows response mode
# What an unsaved edit must leave as it was.
UNCHANGED = ("name", "completion", "version", "updated_at")


def fill_new_job(console: Console, target: Target, name: str) -> None:
    """Sign in, open New job and fill what every job needs."""
    page = console.page
    console.sign_in()
    page.get_by_role("link", name="New job").first.click()
    page.get_by_label("Name").fill(name)
    page.get_by_label("Schedule").fill(HOURLY)
    page.get_by_label("URL").fill(target.url + "/" + name)


def stored(console: Console, job: dict[str, Any]) -> dict[str, Any]:
    status, saved = console.api("GET", f"/jobs/{job['id']}")
    assert status == 200, saved
    return saved


def only_job(console: Console) -> dict[str, Any]:
    status, jobs = console.api("GET", "/jobs")
    assert status == 200 and len(jobs["items"]) == 1, jobs
    return stored(console, jobs["items"][0])


def open_edit(console: Console, job: dict[str, Any]) -> None:
    console.open(f"#/jobs/{job['id']}/edit")
    expect(console.page.get_by_label("Name")).to_have_value(job["name"])


def save_edit(console: Console, name: str) -> Any:
    """Save the form and wait for the job's page; the PATCH body the form sent."""
    page = console.page
    with page.expect_request(lambda r: r.method == "PATCH") as sent:
        page.get_by_role("button", name="Save changes").click()
    expect(page.get_by_role("heading", name=name, exact=True)).to_be_visible()
    return sent.value.post_data_json


def setting(console: Console, term: str) -> Any:
    """The value of one row of the job page's settings."""
    return console.page.locator(f".settings dt:text-is('{term}') + dd")


def test_a_job_created_in_callback_mode_stores_and_shows_its_timeout(console: Console, target: Target) -> None:
    page = console.page
    fill_new_job(console, target, "batch")
    page.get_by_label("A run ends").select_option("callback")
    page.get_by_label("Callback timeout (seconds)").fill("600")
    page.get_by_role("button", name="Create job").click()

    expect(page.get_by_role("heading", name="batch", exact=True)).to_be_visible()
    assert only_job(console)["completion"] == CALLBACK_600
    expect(setting(console, "Completion")).to_contain_text("callback")
    expect(setting(console, "Completion")).to_contain_text("within 600 s")


def test_the_callback_timeout_is_disabled_in_response_mode_and_not_sent(console: Console, target: Target) -> None:
    page = console.page
    fill_new_job(console, target, "answered")
    mode = page.get_by_label("A run ends")
    timeout = page.get_by_label("Callback timeout (seconds)")
    expect(mode).to_have_value("response")
    expect(timeout).to_be_disabled()
    mode.select_option("callback")
    expect(timeout).to_be_enabled()
    timeout.fill("600")
    mode.select_option("response")
    expect(timeout).to_be_disabled()
    expect(timeout).to_have_value("600")  # kept for a switch back to callback, greyed out meanwhile
    background = "e => getComputedStyle(e).backgroundColor"
    assert timeout.evaluate(background) != page.get_by_label("Name").evaluate(background)

    with page.expect_request(lambda r: r.method == "POST" and r.url.endswith("/jobs")) as sent:
        page.get_by_role("button", name="Create job").click()
    expect(page.get_by_role("heading", name="answered", exact=True)).to_be_visible()
    assert sent.value.post_data_json["completion"] == {"mode": "response"}
    job = only_job(console)
    assert job["completion"] == RESPONSE
    expect(setting(console, "Id")).to_have_text(job["id"])
    expect(setting(console, "Completion")).to_have_count(0)


def test_an_edit_sends_completion_whole_when_it_changes_and_not_at_all_otherwise(console: Console,
                                                                                target: Target) -> None:
    job = console.job(name="batch", schedule=HOURLY, request={"url": target.url + "/b"}, completion=CALLBACK_600)
    page = console.page
    mode = page.get_by_label("A run ends")
    timeout = page.get_by_label("Callback timeout (seconds)")
    console.sign_in()
    open_edit(console, job)
    expect(mode).to_have_value("callback")
    expect(timeout).to_have_value("600")
    expect(timeout).to_be_enabled()

    page.get_by_label("Name").fill("batch v2")
    assert save_edit(console, "batch v2") == {"name": "batch v2"}
    assert stored(console, job)["completion"] == CALLBACK_600
    expect(setting(console, "Completion")).to_contain_text("within 600 s")

    open_edit(console, stored(console, job))
    timeout.fill("900")  # PATCH replaces completion as a whole: its mode goes along
    assert save_edit(console, "batch v2") == {"completion": {"mode": "callback", "timeout_seconds": 900}}
    assert stored(console, job)["completion"] == {"mode": "callback", "timeout_seconds": 900}

    open_edit(console, stored(console, job))
    mode.select_option("response")
    expect(timeout).to_be_disabled()
    assert save_edit(console, "batch v2") == {"completion": {"mode": "response"}}
    assert stored(console, job)["completion"] == RESPONSE
    expect(setting(console, "Id")).to_have_text(job["id"])  # the settings are drawn, without a Completion row
    expect(setting(console, "Completion")).to_have_count(0)


@pytest.mark.parametrize("value", ["0", "86401"])
def test_a_timeout_out_of_range_in_a_new_job_shows_the_apis_400_at_the_field_and_creates_nothing(
    console: Console, target: Target, value: str,
) -> None:
    page = console.page
    fill_new_job(console, target, "too-long")
    page.get_by_label("A run ends").select_option("callback")
    timeout = page.get_by_label("Callback timeout (seconds)")
    timeout.fill(value)
    with page.expect_response(lambda r: r.request.method == "POST" and r.url.endswith("/jobs")) as answer:
        page.get_by_role("button", name="Create job").click()

    error = answer.value.json()["error"]
    assert (answer.value.status, error["field"]) == (400, "completion.timeout_seconds")
    expect(page.locator("#f-completion-timeout-error")).to_have_text(error["message"])
    expect(timeout).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_role("heading", name="New job")).to_be_visible()
    assert console.api("GET", "/jobs")[1]["items"] == []


def test_a_timeout_out_of_range_in_an_edit_shows_the_apis_400_and_changes_nothing(console: Console,
                                                                                 target: Target) -> None:
    job = console.job(name="batch", schedule=HOURLY, request={"url": target.url + "/b"}, completion=CALLBACK_600)
    before = {field: job[field] for field in UNCHANGED}
    page = console.page
    timeout = page.get_by_label("Callback timeout (seconds)")
    console.sign_in()
    open_edit(console, job)
    page.get_by_label("Name").fill("batch v2")
    timeout.fill("86401")
    with page.expect_response(lambda r: r.request.method == "PATCH") as answer:
        page.get_by_role("button", name="Save changes").click()

    error = answer.value.json()["error"]
    assert (answer.value.status, error["field"]) == (400, "completion.timeout_seconds")
    expect(page.locator("#f-completion-timeout-error")).to_have_text(error["message"])
    expect(timeout).to_have_attribute("aria-invalid", "true")
    assert {field: stored(console, job)[field] for field in UNCHANGED} == before

    timeout.fill("86400")  # the edge is allowed, and the form saves once corrected
    assert save_edit(console, "batch v2") == {"name": "batch v2",
                                             "completion": {"mode": "callback", "timeout_seconds": 86400}}
    assert stored(console, job)["completion"] == {"mode": "callback", "timeout_seconds": 86400}


def test_a_job_created_with_a_spread_stores_it_and_its_page_says_so(console: Console, target: Target) -> None:
    page = console.page
    fill_new_job(console, target, "spread-out")
    with page.expect_request(lambda r: r.url.endswith("/schedules/preview")
                             and r.post_data_json["spread_seconds"] == 120):  # the preview takes it as typed
        page.get_by_label("Spread (seconds)").fill("120")
    expect(page.locator("#preview")).to_contain_text("the spread offset come from the id")
    page.get_by_role("button", name="Create job").click()

    expect(page.get_by_role("heading", name="spread-out", exact=True)).to_be_visible()
    assert only_job(console)["spread_seconds"] == 120
    expect(setting(console, "Spread")).to_have_text(re.compile(r"^up to 120 s "))


def test_a_job_created_with_calendars_stores_them_and_an_edit_without_names_clears_them(console: Console,
                                                                                       target: Target) -> None:
    for name in ("holidays", "closures"):
        assert console.api("PUT", f"/calendars/{name}", {"dates": []})[0] == 201
    page = console.page
    names = page.get_by_label("Not on the dates of calendars (optional)")
    on_excluded = page.get_by_label("On an excluded date")
    fill_new_job(console, target, "workdays")
    names.fill(" holidays,closures, ")
    on_excluded.select_option("next_day")
    page.get_by_role("button", name="Create job").click()

    expect(page.get_by_role("heading", name="workdays", exact=True)).to_be_visible()
    job = only_job(console)
    assert job["calendar"] == {"exclude": ["holidays", "closures"], "on_excluded": "next_day"}
    expect(setting(console, "Calendars")).to_have_text(
        "not on dates of holidays, closures: runs on the next date not excluded")

    open_edit(console, job)
    expect(names).to_have_value("holidays, closures")
    expect(on_excluded).to_have_value("next_day")
    names.fill("")
    assert save_edit(console, "workdays") == {"calendar": None}
    assert stored(console, job)["calendar"] is None
    expect(setting(console, "Id")).to_have_text(job["id"])
    expect(setting(console, "Calendars")).to_have_count(0)


def test_a_job_created_with_max_runs_and_end_action_stores_them_shows_runs_sent_and_an_edit_clears_them(
        console: Console, target: Target) -> None:
    page = console.page
    max_runs = page.get_by_label("Max runs (optional)")
    end_action = page.get_by_label("Once its last run ended")
    fill_new_job(console, target, "three-times")
    expect(end_action).to_have_value("none")
    max_runs.fill("3")
    end_action.select_option("delete")
    with page.expect_request(lambda r: r.method == "POST" and r.url.endswith("/jobs")) as sent:
        page.get_by_role("button", name="Create job").click()
    expect(page.get_by_role("heading", name="three-times", exact=True)).to_be_visible()
    assert {k: sent.value.post_data_json[k] for k in ("max_runs", "end_action")} == {"max_runs": 3, "end_action": "delete"}
    job = only_job(console)
    assert (job["max_runs"], job["end_action"], job["runs_sent"]) == (3, "delete", 0)
    expect(setting(console, "Runs sent")).to_have_text("0 of 3 (max runs)")
    expect(setting(console, "Once ended")).to_have_text("deleted, its runs kept")

    open_edit(console, job)
    expect(max_runs).to_have_value("3")
    expect(end_action).to_have_value("delete")
    max_runs.fill("")
    end_action.select_option("none")
    assert save_edit(console, "three-times") == {"max_runs": None, "end_action": "none"}
    assert (stored(console, job)["max_runs"], stored(console, job)["end_action"]) == (None, "none")
    expect(setting(console, "Id")).to_have_text(job["id"])
    expect(setting(console, "Runs sent")).to_have_count(0)
    expect(setting(console, "Once ended")).to_have_count(0)


def test_a_job_created_without_max_runs_leaves_it_unset(console: Console, target: Target) -> None:
    page = console.page
    fill_new_job(console, target, "unbounded")
    with page.expect_request(lambda r: r.method == "POST" and r.url.endswith("/jobs")) as sent:
        page.get_by_role("button", name="Create job").click()
    expect(page.get_by_role("heading", name="unbounded", exact=True)).to_be_visible()
    assert "max_runs" not in sent.value.post_data_json and sent.value.post_data_json["end_action"] == "none"
    assert (only_job(console)["max_runs"], only_job(console)["end_action"]) == (None, "none")


def test_the_job_page_counts_runs_sent_as_they_go_and_shows_the_job_completed_at_max_runs(console: Console,
                                                                                        target: Target) -> None:
    """The local runtime sends the job's runs every second: the page, open from before the first, follows
    runs_sent up to max_runs (its settings redrawn without an edit) and the job's end."""
    job = console.job(name="twice", schedule="* * * * * *", request={"url": target.url + "/twice"}, max_runs=2)
    console.sign_in()
    console.open(f"#/jobs/{job['id']}")
    expect(console.page.get_by_role("heading", name="twice", exact=True)).to_be_visible()
    expect(setting(console, "Runs sent")).to_have_text("2 of 2 (max runs)", timeout=20_000)
    expect(console.page.locator(".title-row")).to_contain_text("completed", timeout=20_000)
    assert stored(console, job)["runs_sent"] == 2
