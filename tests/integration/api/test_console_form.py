"""The console's job form in a real browser (Debian's Chromium): what a field set in the form is stored as
(GET /jobs/{id}) and shown as on the job page, and the API's 400 shown at the field it names.

Same runtime, browser and tab as tests/integration/api/test_console.py; every wait is on a condition.
"""
from __future__ import annotations

from typing import Any

from tests.conftest import Target
from tests.integration.api import test_console
from tests.integration.api.test_console import HOURLY, Console, expect

pytestmark = test_console.pytestmark
runtime = test_console.runtime
browser = test_console.browser
console = test_console.console


def fill_new_job(console: Console, target: Target, name: str) -> None:
    """Sign in, open New job and fill what every job needs."""
    page = console.page
    console.sign_in()
    page.get_by_role("link", name="New job").first.click()
    page.get_by_label("Name").fill(name)
    page.get_by_label("Schedule").fill(HOURLY)
    page.get_by_label("URL").fill(target.url + "/" + name)


def only_job(console: Console) -> dict[str, Any]:
    status, jobs = console.api("GET", "/jobs")
    assert status == 200 and len(jobs["items"]) == 1, jobs
    status, job = console.api("GET", f"/jobs/{jobs['items'][0]['id']}")
    assert status == 200, job
    return job


def setting(console: Console, term: str) -> Any:
    """The value of one row of the job page's settings."""
    return console.page.locator(f".settings dt:text-is('{term}') + dd")


def test_a_job_created_in_callback_mode_stores_and_shows_its_timeout(console: Console, target: Target) -> None:
    page = console.page
    fill_new_job(console, target, "batch")
    page.get_by_label("A run ends").select_option("callback")
    page.get_by_label("Callback timeout (seconds)").fill("600")
    page.get_by_role("button", name="Create job").click()

    expect(page.get_by_role("heading", name="batch")).to_be_visible()
    assert only_job(console)["completion"] == {"mode": "callback", "timeout_seconds": 600}
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
    expect(page.get_by_role("heading", name="answered")).to_be_visible()
    assert sent.value.post_data_json["completion"] == {"mode": "response"}
    assert only_job(console)["completion"] == {"mode": "response", "timeout_seconds": None}
    expect(setting(console, "Completion")).to_have_count(0)
