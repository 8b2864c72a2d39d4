"""A job in quarantine in the console, in Debian's Chromium against the local runtime
(tickwork.dispatch.quarantine): the jobs list shows it `errored` with its reason (and filters on it), its page
says since when and why, and "Try again now" releases it."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from tests.conftest import Target
from tests.integration.api import test_console
from tests.integration.api.test_console import HOURLY, Console, expect
from tickwork.rules.quarantine import backoff_steps
from tickwork.store import quarantine as quarantine_store

pytestmark = pytest.mark.slow
runtime = test_console.runtime
browser = test_console.browser
console = test_console.console

REASON = "OverflowError while applying its calendars"


def test_a_job_in_quarantine_shows_errored_with_its_reason_and_try_again_releases_it(
    console: Console, target: Target,
) -> None:
    stuck = console.job(name="stuck", schedule=HOURLY, request={"url": target.url + "/s"})
    console.job(name="fine", schedule=HOURLY, request={"url": target.url + "/f"})
    assert console.runtime._services is not None
    with console.runtime._services.db.connection() as conn:  # what the poller writes when its handling raises
        quarantine_store.set_aside(conn, {stuck["id"]: REASON}, datetime.now(timezone.utc), backoff_steps())
    page = console.page
    console.sign_in()

    row = page.locator("tr", has_text="stuck")
    expect(row.locator(".badge")).to_have_text("errored")
    expect(row).to_contain_text(REASON)
    page.get_by_label("Status").select_option("errored")
    expect(page.locator("tbody tr:visible")).to_have_count(1)
    expect(page.get_by_text("1 of 2 jobs shown.")).to_be_visible()

    page.get_by_role("link", name="stuck").click()
    header = page.locator(".title-row .badge")
    expect(header).to_have_text("errored")
    expect(page.locator(".errored")).to_contain_text("Set aside by the scheduler since")
    expect(page.locator(".errored")).to_contain_text(REASON)
    expect(page.get_by_text("its next run waits for its retry or a release")).to_be_visible()

    page.get_by_role("button", name="Try again now").click()
    expect(header).to_have_text("active")
    expect(page.locator(".errored")).to_be_hidden()
    expect(page.locator(".times li")).to_have_count(10)
    shown = console.api("GET", f"/jobs/{stuck['id']}")[1]
    assert (shown["status"], shown["error_reason"], shown["errored_at"]) == ("active", None, None)
