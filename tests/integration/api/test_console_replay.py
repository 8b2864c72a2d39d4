"""Replaying a window of a job's runs from its page in the console (POST /jobs/{id}/replay), in Debian's Chromium
against the local runtime: the check (a dry run) and its count, the replay itself sent once under one
Idempotency-Key, the API's 400s at the field they name, the form kept from a key without runs:write, and the
form at phone width.

The runs are written into PostgreSQL around the test's own clock (which the runtime shares), and the form's
window is typed from that clock too: the browser keeps the real clock when the tests' date is shifted. The
browser's time zone is pinned to one 9.5 hours ahead of UTC, so a time typed or shown in local time is
checked against the API's UTC.
"""
from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
import pytest

from tests.conftest import Target
from tests.integration.api.test_console import (HOURLY, Console, browser, console, expect,  # noqa: F401 - fixtures
                                                runtime)
from tests.integration.console_browser import job_runs
from tests.integration.helpers import API_POLL_INTERVAL
from tests.support import wait_for
from tickwork_local.runtime import LocalRuntime

pytestmark = pytest.mark.slow

WAIT_SECONDS = 20.0
# Not the machine's zone, and half an hour off any whole-hour zone: a time read or shown in another zone differs.
ZONE = "Australia/Darwin"
INPUT_FORMAT = "%Y-%m-%dT%H:%M"  # what a datetime-local input takes, to the minute
SHOWN_FORMAT = "%Y-%m-%d %H:%M:%S"  # how the console shows a time (format.js absTime)


@dataclass(frozen=True)
class Outage:
    """A paused job's runs around `now`: three failed in the last 24 hours (what a replay of that window with
    the default statuses sends) and `others` it leaves alone (failed before the window, succeeded and
    skipped in it)."""

    job: dict[str, Any]
    now: datetime
    failed: list[str]
    others: list[str]


def add_runs(runtime: LocalRuntime, job_id: str, runs: list[tuple[str, datetime]]) -> list[str]:
    """Ended execution rows, as the poller and executors leave them (a run's attempts are not needed)."""
    ids = [str(uuid.uuid4()) for _ in runs]
    with psycopg.connect(runtime.settings.database_url, autocommit=True) as conn:
        for run_id, (status, slot) in zip(ids, runs):
            attempts = 0 if status in ("missed", "skipped") else 1
            conn.execute("INSERT INTO executions (id, tenant_id, job_id, scheduled_for, trigger, status, attempt_count,"
                         " finished_at) VALUES (%s, %s, %s, %s, 'schedule', %s, %s, %s)",
                         (run_id, runtime.tenant_id, job_id, slot, status, attempts, slot))
    return ids


def outage(tab: Console, target: Target) -> Outage:
    job = tab.job(name="outage", schedule=HOURLY, request={"url": target.url + "/outage"}, retry={"max_attempts": 1})
    assert tab.api("POST", f"/jobs/{job['id']}/pause")[0] == 200  # no slot of its own comes to the target
    now = datetime.now(timezone.utc)
    hours = lambda h: now - timedelta(hours=h)  # noqa: E731
    failed = add_runs(tab.runtime, job["id"], [("failed", hours(3)), ("failed", hours(2)), ("failed", hours(1))])
    others = add_runs(tab.runtime, job["id"],
                      [("failed", hours(30)), ("succeeded", hours(1.5)), ("skipped", hours(2.5))])
    return Outage(job, now, failed, others)


def zoned(tab: Console) -> Console:
    """The tab's page in ZONE (before it loads anything), as Playwright's timezone_id would set it."""
    session = tab.context.new_cdp_session(tab.page)
    session.send("Emulation.setTimezoneOverride", {"timezoneId": ZONE})
    tab.cdp = session  # type: ignore[attr-defined]  # kept attached: the override lasts as long as its session
    return tab


def typed(moment: datetime) -> str:
    return moment.astimezone(ZoneInfo(ZONE)).strftime(INPUT_FORMAT)


def sent(moment: datetime) -> str:
    """`moment` typed (to the minute) as the page sends it: UTC, as JavaScript's toISOString writes it."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:00.000Z")


def shown(rfc3339: str) -> str:
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).astimezone(ZoneInfo(ZONE)).strftime(SHOWN_FORMAT)


def spanned(answer: dict[str, Any], between: str) -> str:
    """When a batch's first and last runs go, as the page says it: `between` ("from {} to {}") unless both
    show as the same second (3 runs at the default pace of 10 a second often do)."""
    first, last = shown(answer["first_at"]), shown(answer["last_at"])
    return f"all at {first} (within that second)" if first == last else between.format(first, last)


def job_page(tab: Console, job_id: str) -> None:
    tab.sign_in()
    tab.open(f"#/jobs/{job_id}")


def open_form(tab: Console) -> Any:
    """The job page's replay form opened: its section."""
    toggle = tab.page.get_by_role("button", name="Replay runs", exact=True)
    toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    form = tab.page.locator("#replay-panel")
    expect(form.get_by_role("heading", name="Replay runs")).to_be_visible()
    return form


def opened(tab: Console, target: Target) -> tuple[Outage, Any]:
    """An outage's job page, in ZONE, with its replay form open."""
    window = outage(zoned(tab), target)
    job_page(tab, window.job["id"])
    return window, open_form(tab)


def fill_window(form: Any, since: datetime, until: datetime) -> None:
    form.get_by_label("Since", exact=True).fill(typed(since))
    form.get_by_label("Until", exact=True).fill(typed(until))


def last_day(form: Any, outage_: Outage) -> None:
    """The 24 hours before the outage's `now` (to the minute after it): its three failed runs and no earlier one."""
    fill_window(form, outage_.now - timedelta(hours=24), outage_.now + timedelta(minutes=1))


def replay_posts(page: Any) -> list[Any]:
    """Every POST /jobs/{id}/replay the page sends, from now on."""
    posts: list[Any] = []
    page.on("request", lambda r: posts.append(r) if r.method == "POST" and r.url.endswith("/replay") else None)
    return posts


def replayed(posts: list[Any]) -> list[Any]:
    return [r for r in posts if json.loads(r.post_data)["dry_run"] is False]


def is_replay(response: Any, dry_run: bool) -> bool:
    request = response.request
    return (request.method == "POST" and request.url.endswith("/replay")
            and json.loads(request.post_data)["dry_run"] is dry_run)


def answer_of(page: Any, click: Any, dry_run: bool) -> dict[str, Any]:
    """The API's answer to the replay request (a dry run or not) that `click` sends."""
    with page.expect_response(lambda r: is_replay(r, dry_run)) as response:
        click()
    assert response.value.status == 202, response.value.text()
    return response.value.json()


def runs_by_id(tab: Console, job_id: str) -> dict[str, dict[str, Any]]:
    return {run["id"]: run for run in job_runs(tab.runtime, job_id)}


def replay_audit(tab: Console, job_id: str) -> list[str]:
    status, page = tab.api("GET", f"/audit?job_id={job_id}")
    assert status == 200, page
    return [entry["target"] for entry in page["items"] if entry["action"] == "job.replayed"]


def test_check_counts_the_windows_failed_runs_in_local_time_and_changes_nothing(console: Console,
                                                                                target: Target) -> None:
    window = outage(zoned(console), target)
    before = runs_by_id(console, window.job["id"])
    job_page(console, window.job["id"])
    page = console.page
    assert page.evaluate("Intl.DateTimeFormat().resolvedOptions().timeZone") == ZONE

    # It opens on the last 24 hours, to the next whole minute after it opened, by the browser's clock.
    opening = page.evaluate("Date.now()") / 1000
    form = open_form(console)
    opened_by = page.evaluate("Date.now()") / 1000
    since, until = (datetime.strptime(form.get_by_label(name, exact=True).input_value(), INPUT_FORMAT)
                    .replace(tzinfo=ZoneInfo(ZONE)).timestamp() for name in ("Since", "Until"))
    assert until - since == 24 * 3600 and opening <= until < opened_by + 60
    expect(form).to_contain_text(f"({ZONE})")
    checked = form.get_by_role("checkbox")
    assert [(box.get_attribute("value"), box.is_checked()) for box in checked.all()] == [
        ("failed", True), ("lost", True), ("missed", True), ("skipped", False)]

    last_day(form, window)
    posts = replay_posts(page)
    dry = answer_of(page, form.get_by_role("button", name="Check").click, dry_run=True)

    # The times typed in the zone's local time, sent in UTC.
    assert json.loads(posts[0].post_data) == {
        "since": sent(window.now - timedelta(hours=24)), "until": sent(window.now + timedelta(minutes=1)),
        "statuses": ["failed", "lost", "missed"], "dry_run": True}
    assert (dry["count"], dry["dry_run"]) == (3, True)
    result = form.locator(".replay-result")
    expect(result).to_have_text(f"3 runs would be sent again, {spanned(dry, 'from {} to {}')}.")
    expect(result).to_have_attribute("aria-live", "polite")
    expect(form.get_by_role("button", name="Replay 3 runs")).to_be_visible()

    # Nothing was replayed: no run changed, none was sent, the audit log has no replay.
    assert runs_by_id(console, window.job["id"]) == before
    assert target.requests == [] and replay_audit(console, window.job["id"]) == []
    assert replayed(posts) == []

    # A window holding none of them says so, and offers nothing to confirm.
    fill_window(form, window.now - timedelta(days=3), window.now - timedelta(days=2))
    expect(form.get_by_role("button", name="Replay 3 runs")).to_be_hidden()  # the form changed: check again
    assert answer_of(page, form.get_by_role("button", name="Check").click, dry_run=True)["count"] == 0
    expect(result).to_have_text("No run in this window matches.")
    expect(form.get_by_role("button", name=re.compile("^Replay [0-9]+ runs?$"))).to_have_count(0)


def test_confirm_replays_exactly_the_windows_failed_runs_once_on_a_double_click(console: Console,
                                                                                 target: Target) -> None:
    window, form = opened(console, target)
    before = runs_by_id(console, window.job["id"])
    page = console.page
    last_day(form, window)
    posts = replay_posts(page)
    form.get_by_role("button", name="Check").click()
    confirm = form.get_by_role("button", name="Replay 3 runs")

    answer = answer_of(page, confirm.dblclick, dry_run=False)

    assert (answer["count"], answer["dry_run"]) == (3, False)
    assert answer["execution_ids"] == window.failed  # in slot order
    expect(form.locator(".replay-result")).to_have_text(
        f"3 runs queued, {spanned(answer, 'the first at {}, the last at {}')}.")
    expect(form.locator(".replay-result")).to_be_focused()  # the button pressed is gone
    [sent] = replayed(posts)  # the double click's second click found the button disabled
    key = sent.all_headers()["idempotency-key"]
    assert str(uuid.UUID(key)) == key
    # The runs table shows the replays as they go: each failed run of the window ends succeeded.
    for run_id in window.failed:
        row = page.locator(f"#main table.data tbody tr:has(a[href='#/runs/{run_id}'])")
        expect(row.locator(".badge")).to_have_text("succeeded")

    assert wait_for(lambda: len(target.requests) >= 3, timeout=WAIT_SECONDS, interval=API_POLL_INTERVAL)
    assert sorted(r["headers"]["Tickwork-Run-Id"] for r in target.requests) == sorted(window.failed)
    after = runs_by_id(console, window.job["id"])
    assert [(after[i]["status"], after[i]["replay_count"]) for i in window.failed] == [("succeeded", 1)] * 3
    assert {i: after[i] for i in window.others} == {i: before[i] for i in window.others}
    assert len(replay_audit(console, window.job["id"])) == 1


def test_a_replay_whose_answer_was_lost_is_sent_again_under_its_key_and_replays_once(console: Console,
                                                                                     target: Target) -> None:
    window, form = opened(console, target)
    page = console.page
    last_day(form, window)
    posts = replay_posts(page)
    lost: list[Any] = []

    def lose_the_first_answer(route: Any) -> None:
        if json.loads(route.request.post_data)["dry_run"] or lost:
            route.continue_()
            return
        lost.append(route.fetch())  # the API replays the window; its answer never reaches the page
        route.abort("connectionreset")

    page.route(re.compile(r"/jobs/[^/]+/replay$"), lose_the_first_answer)
    form.get_by_role("button", name="Check").click()
    confirm = form.get_by_role("button", name="Replay 3 runs")
    confirm.click()
    expect(form.get_by_role("alert")).to_contain_text("No answer from the Tickwork API")
    assert lost[0].status == 202 and lost[0].json()["count"] == 3

    with page.expect_response(lambda r: is_replay(r, dry_run=False)) as again:
        confirm.click()

    assert again.value.status == 202 and again.value.headers["idempotent-replayed"] == "true"
    expect(form.locator(".replay-result")).to_contain_text("3 runs queued")
    expect(form.get_by_role("alert")).to_be_hidden()
    first, second = replayed(posts)
    assert first.all_headers()["idempotency-key"] == second.all_headers()["idempotency-key"]
    assert wait_for(lambda: all(run["status"] == "succeeded" for i, run in runs_by_id(console, window.job["id"]).items()
                                if i in window.failed), timeout=WAIT_SECONDS, interval=API_POLL_INTERVAL)
    after = runs_by_id(console, window.job["id"])
    assert [after[i]["replay_count"] for i in window.failed] == [1, 1, 1]
    assert sorted(r["headers"]["Tickwork-Run-Id"] for r in target.requests) == sorted(window.failed)
    assert len(replay_audit(console, window.job["id"])) == 1


def test_the_apis_400_is_shown_at_the_field_it_names(console: Console, target: Target) -> None:
    window, form = opened(console, target)
    until = form.get_by_label("Until", exact=True)
    check = form.get_by_role("button", name="Check")

    fill_window(form, window.now, window.now - timedelta(hours=1))  # until before since
    check.click()
    expect(form.locator("#replay-until-error")).to_have_text("must be later than since")
    expect(until).to_have_attribute("aria-invalid", "true")
    expect(until).to_be_focused()
    expect(until).to_have_attribute("aria-describedby", "replay-until-error replay-until-hint")

    fill_window(form, window.now - timedelta(days=40), window.now)  # longer than 31 days
    check.click()
    expect(form.locator("#replay-until-error")).to_contain_text("at most 31 days")

    # Corrected, the error goes and the check answers.
    last_day(form, window)
    check.click()
    expect(form.locator("#replay-until-error")).to_be_hidden()
    expect(until).not_to_have_attribute("aria-invalid", "true")
    expect(form.locator(".replay-result")).to_contain_text("3 runs would be sent again")

    # No status checked: said at the statuses, before anything is sent.
    for box in form.get_by_role("checkbox").all():
        box.uncheck()
    check.click()
    expect(form.locator("#replay-statuses-error")).to_have_text("check at least one")
    expect(form.locator("#replay-statuses")).to_be_focused()
    assert target.requests == [] and replay_audit(console, window.job["id"]) == []


def test_a_key_without_runs_write_is_not_offered_the_replay(console: Console, target: Target) -> None:
    window = outage(console, target)
    status, reader = console.api("POST", "/api-keys", {"name": "editor", "scopes": ["jobs:read", "jobs:write"]})
    assert status == 201, reader
    page = console.page
    console.sign_in(reader["key"])
    console.open(f"#/jobs/{window.job['id']}")
    expect(page.get_by_role("button", name="Resume")).to_be_visible()  # its actions are shown: jobs:write
    expect(page.get_by_role("button", name="Replay runs")).to_have_count(0)
    expect(page.locator("#replay-panel")).to_be_hidden()


def test_the_replay_form_fits_a_phone(browser: Any, runtime: LocalRuntime,  # noqa: F811
                                      target: Target) -> None:
    phone = Console(browser, runtime, width=375, height=740)
    try:
        window, form = opened(phone, target)
        last_day(form, window)
        form.get_by_role("button", name="Check").click()
        expect(form.get_by_role("button", name="Replay 3 runs")).to_be_visible()
        assert phone.page.evaluate("document.documentElement.scrollWidth") == 375
    finally:
        phone.close()
