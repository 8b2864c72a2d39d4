"""The console in a real browser (Debian's Chromium, driven by Playwright) against the local runtime: the real
API server, poller and executors on the tests' PostgreSQL and Redis, calling a real local Target.

Every wait is on a condition (Playwright's auto-waiting `expect`), never a fixed sleep.
"""
from __future__ import annotations

import hashlib
import re
import threading
from typing import Any, Iterator

import pytest

from tests.conftest import Target
from tests.integration.console_browser import call, chromium_path, create_job, job_runs
from tests.integration.helpers import API_POLL_INTERVAL
from tests.local import test_local_runtime
from tests.support import wait_for
from tickwork_local.cluster import without_faketime
from tickwork_local.runtime import LocalRuntime

pytestmark = pytest.mark.slow
runtime = test_local_runtime.runtime  # the fixture: the whole local runtime on the test's schema, on a free port

# Generous for a loaded machine: an every-second job's runs show up within a few seconds when idle.
WAIT_MS = 20_000
XSS_NAME = "<img src=x onerror=alert(1)>"
HOURLY = "0 0 * * * *"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    path = chromium_path()
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=WAIT_MS)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=path, env=without_faketime())
        yield chromium
        chromium.close()


class Console:
    """A browser tab on the console, recording every JavaScript dialog (none may open) and page error."""

    def __init__(self, browser: Any, runtime: LocalRuntime, width: int = 1280, height: int = 800) -> None:
        self.runtime = runtime
        self.context = browser.new_context(viewport={"width": width, "height": height})
        self.page = self.context.new_page()
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        self.page.on("dialog", self._dialog)
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    def api(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return call(self.runtime, method, path, body)

    def job(self, **fields: Any) -> dict[str, Any]:
        return create_job(self.runtime, **fields)

    def open(self, fragment: str = "") -> None:
        self.page.goto(f"{self.runtime.api_url}/console{fragment}")

    def sign_in(self, key: str | None = None) -> None:
        from playwright.sync_api import expect

        self.open()
        self.page.get_by_label("API key").fill(key or self.runtime.api_key)
        self.page.get_by_role("button", name="Sign in").click()
        expect(self.page.get_by_role("heading", name="Jobs", exact=True)).to_be_visible()

    def stored(self, storage: str) -> dict[str, str]:
        return self.page.evaluate(f"() => Object.fromEntries(Object.entries({storage}))")

    def close(self) -> None:
        self.context.close()
        assert self.errors == [], f"JavaScript errors: {self.errors}"


@pytest.fixture
def console(browser: Any, runtime: LocalRuntime) -> Iterator[Console]:
    tab = Console(browser, runtime)
    yield tab
    tab.close()


def expect(locator: Any) -> Any:
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(locator)


def test_a_wrong_key_shows_the_apis_error_and_the_right_one_signs_in_by_keyboard(console: Console) -> None:
    page = console.page
    console.open()
    key_field = page.get_by_label("API key")
    expect(key_field).to_be_focused()
    assert key_field.get_attribute("type") == "password"

    page.keyboard.type("tw_not-a-key")
    page.keyboard.press("Enter")
    expect(page.get_by_role("alert")).to_contain_text("invalid API key")
    assert console.stored("sessionStorage") == {}

    key_field.fill(console.runtime.api_key)
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Jobs", exact=True)).to_be_visible()
    assert console.stored("sessionStorage") == {"tickwork.apiKey": console.runtime.api_key, "tickwork.scopes":
                                                 '["jobs:read","jobs:write","runs:write","secrets:write","keys:admin","audit:read"]'}
    assert console.stored("localStorage") == {}
    assert page.evaluate("document.cookie") == ""
    assert console.runtime.api_key not in page.url


def test_sign_out_forgets_the_key(console: Console) -> None:
    console.sign_in()
    console.page.get_by_role("button", name="Sign out").click()

    expect(console.page.get_by_label("API key")).to_be_visible()
    assert console.stored("sessionStorage") == {}
    console.page.reload()
    expect(console.page.get_by_label("API key")).to_be_visible()
    expect(console.page.get_by_role("button", name="Sign out")).to_be_hidden()


def test_create_a_job_from_the_form_with_a_live_preview_and_watch_its_runs_appear(console: Console,
                                                                                 target: Target) -> None:
    page = console.page
    console.sign_in()
    page.get_by_role("link", name="New job").first.click()
    page.get_by_label("Name").fill("heartbeat")
    schedule = page.get_by_label("Schedule")
    schedule.fill("61 * * * * *")
    expect(page.locator("#f-schedule-error")).to_contain_text("out of range")
    schedule.fill("* * * * * *")
    preview = page.locator("#preview")
    expect(preview).to_contain_text("every second")
    expect(preview.locator("li")).to_have_count(5)
    page.get_by_label("Method").select_option("POST")
    url = page.get_by_label("URL")
    url.fill("ftp://example.com/hook")
    page.get_by_role("button", name="Create job").click()
    expect(page.locator("#f-url-error")).to_be_visible()
    expect(url).to_have_attribute("aria-invalid", "true")

    url.fill(target.url + "/beat")
    page.get_by_role("button", name="Create job").click()

    expect(page.get_by_role("heading", name="heartbeat")).to_be_visible()
    expect(page.locator("#main")).to_contain_text("every second", ignore_case=True)  # the schedule in words
    succeeded = page.locator("#main table.data tbody tr").filter(has_text="succeeded")
    expect(succeeded.nth(1)).to_be_visible()
    expect(page.locator("svg rect.mark.s-succeeded").nth(1)).to_be_attached()
    # Not "100%": on a loaded machine the local runtime may record a slot `missed` (see the run's last_error).
    expect(page.locator(".stats")).to_have_text(re.compile(r"^Last [0-9]+ runs: [0-9]+% succeeded, fire lag p50 .+\.$"))
    expect(succeeded.first.locator("td[data-label='Status code']")).to_have_text("200")
    status, jobs = console.api("GET", "/jobs")
    assert status == 200 and [j["name"] for j in jobs["items"]] == ["heartbeat"]
    assert jobs["items"][0]["request"]["url"] == target.url + "/beat"


def test_open_a_failed_run_and_read_its_error(console: Console, target: Target) -> None:
    target.default_status = 503
    target.response_body = b"upstream is down for maintenance"
    job = console.job(name="flaky", schedule="* * * * * *", request={"url": target.url + "/flaky"},
                      retry={"max_attempts": 1})
    failed = lambda: any(r["status"] == "failed" for r in job_runs(console.runtime, job["id"]))
    assert wait_for(failed, timeout=WAIT_MS / 1000, interval=API_POLL_INTERVAL)
    page = console.page
    console.sign_in()
    row = page.locator("tbody tr").filter(has_text="flaky")
    expect(row).to_contain_text("every second", ignore_case=True)  # the schedule in words
    expect(row.locator("td[data-label='Success (last 50)']")).to_have_text("0%")
    expect(row.locator("td[data-label='Last run'] .badge")).to_have_text("failed")
    row.get_by_role("link", name="flaky").click()
    expect(page.get_by_role("heading", name="flaky")).to_be_visible()
    page.locator("tbody tr").filter(has_text="failed").first.get_by_role("link").click()

    expect(page.get_by_role("heading", name=re.compile("^Run of "))).to_be_visible()
    attempt = page.locator(".attempt").first
    expect(attempt).to_contain_text("503")
    expect(attempt.locator("pre.response")).to_have_text("upstream is down for maintenance")
    run_id = page.url.rsplit("/", 1)[1]
    status, run = console.api("GET", f"/executions/{run_id}")
    assert status == 200 and run["job_id"] == job["id"] and run["status"] == "failed"
    assert run["attempts"][0]["error"]
    expect(attempt.locator(".error-text")).to_have_text(run["attempts"][0]["error"])


def test_the_runs_table_holds_still_under_the_pointer_and_catches_up_when_it_leaves(console: Console,
                                                                                  target: Target) -> None:
    job = console.job(name="ticking", schedule="* * * * * *", request={"url": target.url + "/tick"})
    assert wait_for(lambda: len(job_runs(console.runtime, job["id"])) >= 1, timeout=WAIT_MS / 1000,
                    interval=API_POLL_INTERVAL)
    page = console.page
    console.sign_in()
    page.get_by_role("link", name="ticking").click()
    table = page.get_by_role("table", name="Runs")
    first_link = table.locator("tbody tr").first.locator("th a")
    expect(first_link).to_be_visible()
    first_link.evaluate("link => { link.dataset.seen = 'before'; }")
    table.hover()

    # A refresh under the pointer brings newer runs but leaves every row where it was, the same node.
    held = page.locator("#main p.held")
    expect(held).to_contain_text("shown when the pointer leaves the table")
    expect(table.locator("tbody tr").first.locator("a[data-seen='before']")).to_be_attached()

    page.mouse.move(0, 0)
    expect(held).to_be_hidden()
    expect(table.locator("tbody tr").first.locator("a[data-seen='before']")).to_have_count(0)
    expect(table.locator("tbody a[data-seen='before']")).to_be_attached()  # kept, lower down


def test_a_list_of_more_jobs_than_the_rate_limits_burst_loads_whole(console: Console, target: Target) -> None:
    # Each job costs the jobs page two requests on its first load: past the key's burst of 40, some are
    # refused with 429 and the console waits out their Retry-After instead of failing the page.
    names = [f"job-{i:02}" for i in range(25)]
    for name in names:
        console.job(name=name, schedule=HOURLY, request={"url": target.url + "/" + name})
    page = console.page
    console.sign_in()
    rows = page.locator("#main tbody tr")
    expect(rows).to_have_count(len(names))
    for name in names:
        row = rows.filter(has=page.get_by_role("link", name=name, exact=True))
        expect(row.locator("td[data-label='Schedule'] .words")).to_have_text(re.compile("hour", re.IGNORECASE))
        expect(row.locator("td[data-label='Success (last 50)']")).to_have_text("—")
    expect(page.get_by_role("alert")).to_be_hidden()


def test_a_run_in_progress_says_so_and_updates_by_itself(console: Console, target: Target) -> None:
    gate = threading.Event()
    target.gates["/slow"] = gate
    job = console.job(name="slow", schedule=HOURLY, request={"url": target.url + "/slow"})
    page = console.page
    console.sign_in()
    page.get_by_role("link", name="slow").click()
    page.get_by_role("button", name="Run now").click()
    page.get_by_role("link", name="open it").click()
    expect(page.get_by_role("status")).to_contain_text("still in progress")
    expect(page.locator(".settings .badge").first).to_have_text("running")

    gate.set()

    expect(page.locator(".settings .badge").first).to_have_text("succeeded")
    expect(page.get_by_text("still in progress")).to_have_count(0)
    expect(page.locator(".attempt")).to_contain_text("200")
    status, runs = console.api("GET", f"/jobs/{job['id']}/executions")
    assert status == 200 and [r["status"] for r in runs["items"]] == ["succeeded"]


def test_edit_sends_only_what_changed_and_keeps_secret_headers(console: Console, target: Target) -> None:
    job = console.job(name="report", schedule=HOURLY, request={"url": target.url + "/r",
                                                               "headers": {"Authorization": "Bearer target-secret"}})
    page = console.page
    console.sign_in()
    page.get_by_role("link", name="report").click()
    page.get_by_role("link", name="Edit").click()
    expect(page.get_by_label("Headers")).to_have_value("Authorization: ***")
    expect(page.locator("#preview li")).to_have_count(5)
    page.get_by_label("Name").fill("daily report")
    page.get_by_label("Attempts in all").fill("11")
    page.get_by_role("button", name="Save changes").click()
    expect(page.locator("#f-attempts-error")).to_contain_text("less than or equal to 10")

    page.get_by_label("Attempts in all").fill("5")
    page.get_by_role("button", name="Save changes").click()
    expect(page.get_by_role("heading", name="daily report")).to_be_visible()
    _, saved = console.api("GET", f"/jobs/{job['id']}")
    assert (saved["name"], saved["retry"]["max_attempts"], saved["version"]) == ("daily report", 5, job["version"])
    page.get_by_role("button", name="Run now").click()
    assert wait_for(lambda: len(target.requests) == 1, timeout=WAIT_MS / 1000)
    assert target.requests[0]["headers"]["Authorization"] == "Bearer target-secret"


def test_pause_and_resume(console: Console, target: Target) -> None:
    job = console.job(name="nightly", schedule=HOURLY, request={"url": target.url + "/n"})
    page = console.page
    console.sign_in()
    page.get_by_role("link", name="nightly").click()
    header = page.locator(".title-row .badge")
    expect(header).to_have_text("active")
    expect(page.locator(".times li")).to_have_count(10)

    page.get_by_role("button", name="Pause").click()
    expect(header).to_have_text("paused")
    assert console.api("GET", f"/jobs/{job['id']}")[1]["status"] == "paused"
    expect(page.get_by_text("these slots will not run")).to_be_visible()

    page.get_by_role("button", name="Resume").click()
    expect(header).to_have_text("active")
    assert console.api("GET", f"/jobs/{job['id']}")[1]["status"] == "active"


def test_the_job_page_lists_its_recent_changes_newest_first(console: Console, target: Target) -> None:
    job = console.job(name="audited", schedule=HOURLY, request={"url": target.url + "/a",
                                                                "headers": {"Authorization": "Bearer audit-secret"}})
    page = console.page
    console.sign_in()
    page.get_by_role("link", name="audited").click()
    changes = page.get_by_role("table", name="Changes").locator("tbody tr")
    expect(changes).to_have_count(1)
    expect(changes.first).to_contain_text("created")
    page.get_by_role("button", name="Pause").click()
    expect(changes).to_have_count(2)
    expect(changes.first).to_contain_text("paused")
    expect(changes.first).to_contain_text("status: active → paused")
    # A change made elsewhere (another client) shows up with the page's next refresh.
    assert console.api("PATCH", f"/jobs/{job['id']}", {"name": "audited v2", "request": {
        "headers": {"Authorization": "Bearer rotated-secret"}}})[0] == 200
    expect(changes).to_have_count(3)
    expect(changes.first).to_contain_text("name: audited → audited v2")
    expect(changes.first).to_contain_text("request.headers.Authorization: *** → ***")
    assert "secret" not in changes.first.inner_text()
    # A long value was kept as its size and digest: shown so. This key reads in full: no note about audit:read.
    assert console.api("PATCH", f"/jobs/{job['id']}", {"request": {"method": "POST", "body": "x" * 600}})[0] == 200
    expect(changes).to_have_count(4)
    expect(changes.first).to_contain_text("request.body: — → 600 bytes, sha256 " + hashlib.sha256(b"x" * 600).hexdigest()[:12])
    expect(page.get_by_text("shown to a key with the scope audit:read")).to_be_hidden()
    assert console.dialogs == [] and console.errors == []


def test_a_job_managed_by_a_file_shows_its_key_and_source(console: Console, target: Target) -> None:
    body = {"name": "from-a-file", "schedule": HOURLY, "request": {"url": target.url + "/k"}, "source": "reports-repo"}
    status, _ = console.api("PUT", "/jobs/by-key/nightly-report", body)
    assert status == 201
    page = console.page
    console.sign_in()
    page.get_by_role("link", name="from-a-file").click()
    settings = page.locator(".settings")
    expect(settings).to_contain_text("nightly-report")
    expect(settings).to_contain_text("reports-repo")
    expect(settings).to_contain_text("undone by its next apply")


def test_a_read_only_key_sees_the_job_and_its_runs_but_no_button_that_would_change_them(
    console: Console, target: Target,
) -> None:
    job = console.job(name="watched", schedule=HOURLY, request={"url": target.url + "/w"})
    assert console.api("POST", f"/jobs/{job['id']}/run")[0] == 202
    assert console.api("PATCH", f"/jobs/{job['id']}", {"description": "watch-canary"})[0] == 200
    status, reader = console.api("POST", "/api-keys", {"name": "viewer", "scopes": ["jobs:read"]})
    assert status == 201
    page = console.page
    console.sign_in(reader["key"])
    expect(page.get_by_role("link", name="watched")).to_be_visible()
    expect(page.get_by_role("link", name="New job")).to_have_count(0)
    page.get_by_role("link", name="watched").click()
    expect(page.locator(".times li")).to_have_count(10)
    # Its changes, without who made them nor the values (GET /audit's redacted view), and the page says why.
    changes = page.get_by_role("table", name="Changes").locator("tbody tr")
    expect(changes).to_have_count(3)
    expect(page.get_by_text("shown to a key with the scope audit:read")).to_be_visible()
    expect(changes.first).to_contain_text("updated")
    expect(changes.first.locator("td").nth(2)).to_have_text("description")
    expect(changes.first.locator("td").nth(1)).to_have_text("—")
    assert "watch-canary" not in page.content()
    expect(page.locator("table tbody tr").first).to_be_visible()  # its run is listed
    for name in ("Pause", "Resume", "Run now", "Delete"):
        expect(page.get_by_role("button", name=name)).to_have_count(0)
    expect(page.get_by_role("link", name="Edit")).to_have_count(0)
    console.open("#/new")  # typed by hand: the form is not offered
    expect(page.get_by_role("heading", name="Read only")).to_be_visible()
    expect(page.get_by_label("Schedule")).to_have_count(0)
    # A key that may run jobs but not edit them gets Run now alone.
    status, runner = console.api("POST", "/api-keys", {"name": "runner", "scopes": ["jobs:read", "runs:write"]})
    page.get_by_role("button", name="Sign out").click()
    console.sign_in(runner["key"])
    page.get_by_role("link", name="watched").click()
    expect(page.get_by_role("button", name="Run now")).to_be_visible()
    expect(page.get_by_role("button", name="Pause")).to_have_count(0)
    expect(page.get_by_role("link", name="Edit")).to_have_count(0)


def test_delete_asks_first(console: Console, target: Target) -> None:
    job = console.job(name="doomed", schedule=HOURLY, request={"url": target.url + "/d"})
    page = console.page
    console.sign_in()
    page.get_by_role("link", name="doomed").click()
    page.get_by_role("button", name="Delete", exact=True).click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    assert console.api("GET", f"/jobs/{job['id']}")[0] == 200

    page.get_by_role("button", name="Delete", exact=True).click()
    dialog.get_by_role("button", name="Delete job").click()
    expect(page.get_by_role("heading", name="Jobs", exact=True)).to_be_visible()
    assert console.api("GET", f"/jobs/{job['id']}")[0] == 404


def test_a_job_named_like_markup_renders_as_text(console: Console, target: Target) -> None:
    console.job(name=XSS_NAME, schedule=HOURLY, request={"url": target.url + "/x", "headers": {"X-Note": XSS_NAME}})
    page = console.page
    console.sign_in()
    name_link = page.get_by_role("link", name=XSS_NAME)
    expect(name_link).to_be_visible()
    name_link.click()
    expect(page.get_by_role("heading", name=XSS_NAME)).to_have_text(XSS_NAME)
    expect(page.locator(".settings")).to_contain_text(f"X-Note: {XSS_NAME}")

    assert page.locator("#main img").count() == 0
    assert console.dialogs == []


def test_the_api_unreachable_shows_a_message_and_retry_recovers(console: Console, target: Target) -> None:
    console.job(name="steady", schedule=HOURLY, request={"url": target.url + "/s"})
    page = console.page
    console.sign_in()
    page.route(re.compile(r"/jobs(\?|$)"), lambda route: route.abort("connectionrefused"))
    page.reload()
    banner = page.get_by_role("alert")
    expect(banner).to_contain_text("cannot be reached")
    retry = banner.get_by_role("button", name="Retry")
    expect(retry).to_be_focused()

    page.unroute(re.compile(r"/jobs(\?|$)"))
    retry.click()
    expect(page.get_by_role("link", name="steady")).to_be_visible()
    expect(banner).to_be_hidden()


def test_phone_width_has_no_horizontal_scroll(browser: Any, runtime: LocalRuntime, target: Target) -> None:
    phone = Console(browser, runtime, width=375, height=740)
    try:
        long_name = "a-rather-long-job-name-that-must-wrap-" * 3
        job = phone.job(name=long_name, schedule="* * * * * *", request={"url": target.url + "/" + "p" * 120})
        finished = lambda: any(r["finished_at"] for r in job_runs(runtime, job["id"]))
        assert wait_for(finished, timeout=WAIT_MS / 1000, interval=API_POLL_INTERVAL)
        page = phone.page
        phone.sign_in()
        expect(page.locator("tbody tr td[data-label='Last run'] .badge")).to_be_visible()
        widths = {}
        widths["jobs"] = page.evaluate("document.documentElement.scrollWidth")
        page.get_by_role("link", name=long_name).click()
        expect(page.locator("#main table.data tbody tr .badge").first).to_be_visible()
        widths["job"] = page.evaluate("document.documentElement.scrollWidth")
        page.locator("#main table.data tbody tr a").first.click()
        expect(page.locator(".attempt")).to_be_visible()
        widths["run"] = page.evaluate("document.documentElement.scrollWidth")
        phone.open(f"#/jobs/{job['id']}/edit")
        expect(page.get_by_label("Schedule")).to_have_value("* * * * * *")
        widths["form"] = page.evaluate("document.documentElement.scrollWidth")

        assert widths == {page_name: 375 for page_name in widths}
    finally:
        phone.close()


def test_success_rate_and_lag_p50_count_what_they_say(console: Console) -> None:
    """The figures the console computes from a job's runs (format.js), on runs written out here."""
    console.open()
    expect(console.page.get_by_label("API key")).to_be_visible()
    asset = console.page.locator("script[type=module]").get_attribute("src")
    assert asset is not None

    figures = console.page.evaluate("""async (app) => {
        const { runStats } = await import(app.replace(/app\\.js$/, 'format.js'));
        const run = (status, lagMs) => ({ status, scheduled_for: '2030-01-01T00:00:00.000Z',
            started_at: lagMs === null ? null : new Date(Date.UTC(2030, 0, 1) + lagMs).toISOString() });
        return [
            runStats([run('succeeded', 10), run('failed', 30), run('succeeded', 20), run('skipped', null),
                      run('running', 1000), run('missed', null)]),
            runStats([run('queued', null)]),
        ];
    }""", asset)

    # 2 of the 4 that ended (skipped and running are not outcomes); median of the 4 lags 10, 20, 30, 1000.
    assert figures == [{"runs": 6, "successRate": 0.5, "lagP50": 25}, {"runs": 1, "successRate": None, "lagP50": None}]


def test_replay_a_failed_run_from_its_page(console: Console, target: Target) -> None:
    target.statuses = [503]  # the run's only attempt fails; its replay is answered 200
    job = console.job(name="replayable", schedule=HOURLY, request={"url": target.url + "/again"},
                      retry={"max_attempts": 1})
    status, queued = console.api("POST", f"/jobs/{job['id']}/run")
    assert status == 202, queued
    done = lambda: console.api("GET", f"/executions/{queued['id']}")[1]["status"] == "failed"
    assert wait_for(done, timeout=WAIT_MS / 1000, interval=API_POLL_INTERVAL)
    page = console.page
    console.sign_in()
    console.open(f"#/runs/{queued['id']}")
    expect(page.locator(".settings .badge").first).to_have_text("failed")

    page.get_by_role("button", name="Replay").click()

    expect(page.locator(".replay-notice")).to_contain_text("Replay queued")
    expect(page.locator(".settings .badge").first).to_have_text("succeeded")
    expect(page.locator(".attempt")).to_have_count(2)
    expect(page.locator(".attempt").nth(1)).to_contain_text("Attempt 2")
    expect(page.locator(".attempt").nth(1)).to_contain_text("200")
    expect(page.locator(".settings").first).to_contain_text("Replayed1 time")
    expect(page.get_by_role("button", name="Replay")).to_have_count(0)  # a succeeded run is not replayed
    assert [r["headers"]["Tickwork-Run-Id"] for r in target.requests] == [queued["id"]] * 2


def test_a_job_takes_calendars_in_the_form_and_its_page_marks_skipped_slots(console: Console, target: Target) -> None:
    job = console.job(name="weekdays", schedule=HOURLY, request={"url": target.url + "/w"})
    page = console.page
    console.sign_in()
    page.get_by_role("link", name="weekdays").click()
    page.get_by_role("link", name="Edit").click()
    page.get_by_label("Not on the dates of calendars (optional)").fill("nope")
    page.get_by_role("button", name="Save changes").click()
    expect(page.locator("#f-calendars-error")).to_contain_text("no calendar of that name")

    # The dates of the next 30 hourly slots: the page's first slot is on one of them whenever it loads.
    slots = console.api("POST", "/schedules/preview", {"schedule": HOURLY, "count": 30})[1]["fire_times"]
    assert console.api("PUT", "/calendars/days-off", {"dates": sorted({t["utc"][:10] for t in slots})})[0] == 201
    page.get_by_label("Not on the dates of calendars (optional)").fill("days-off")
    page.get_by_role("button", name="Save changes").click()
    expect(page.get_by_text("not on dates of days-off: recorded skipped")).to_be_visible()
    expect(page.locator(".times li").first).to_contain_text("excluded by days-off")
    assert console.api("GET", f"/jobs/{job['id']}")[1]["calendar"] == {"exclude": ["days-off"], "on_excluded": "skip"}
