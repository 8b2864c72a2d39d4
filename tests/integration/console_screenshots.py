"""Screenshots of the console for docs/console.md: `make screenshots` (python -m tests.integration.console_screenshots).

Runs the local runtime on a fresh schema (DATABASE_URL / REDIS_URL when set, embedded servers otherwise), creates
a few jobs calling local targets, waits until they have runs, and photographs the main pages at desktop and
phone width with Debian's Chromium.
"""
from __future__ import annotations

import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import psycopg

from tests.conftest import Target
from tests.integration.console_browser import DEFAULT_CHROMIUM, call, create_job, job_runs
from tests.integration.helpers import API_POLL_INTERVAL
from tests.support import wait_for
from tickwork.settings import Settings
from tickwork_local.runtime import LocalRuntime
from tickwork_local.services import resolve

OUT = Path(__file__).resolve().parents[2] / "docs" / "console"
DESKTOP = {"width": 1280, "height": 860}
PHONE = {"width": 375, "height": 760}
SEED_TIMEOUT_SECONDS = 60
# Yearly all-day events: the calendar page shows their next dates whenever the screenshots are taken.
HOLIDAYS = ("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//tickwork//screenshots//EN\r\n"
            "BEGIN:VEVENT\r\nUID:new-year\r\nDTSTART;VALUE=DATE:20200101\r\nRRULE:FREQ=YEARLY\r\n"
            "SUMMARY:New Year\r\nEND:VEVENT\r\n"
            "BEGIN:VEVENT\r\nUID:thanksgiving\r\nDTSTART;VALUE=DATE:20201126\r\nDURATION:P2D\r\n"
            "RRULE:FREQ=YEARLY;BYMONTH=11;BYDAY=4TH\r\nSUMMARY:Thanksgiving\r\nEND:VEVENT\r\n"
            "BEGIN:VEVENT\r\nUID:christmas\r\nDTSTART;VALUE=DATE:20201224\r\nDTEND;VALUE=DATE:20201227\r\n"
            "RRULE:FREQ=YEARLY\r\nSUMMARY:Christmas\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n")


def seed(runtime: LocalRuntime, ok: Target, flaky: Target) -> dict[str, str]:
    assert call(runtime, "PUT", "/calendars/us-holidays", {"ical": HOLIDAYS})[0] == 201
    create_job(runtime, name="weekly-digest", schedule="every monday at 09:00", timezone="America/New_York",
               calendar={"exclude": ["us-holidays"], "on_excluded": "next_day"},
               request={"method": "POST", "url": ok.url + "/digest", "body": "{}",
                        "headers": {"Content-Type": "application/json", "Authorization": "Bearer s3cret-token"}})
    report = create_job(runtime, name="nightly-report", schedule="0 30 2 * * *", timezone="Europe/Paris",
                        request={"url": ok.url + "/report"})
    call(runtime, "POST", f"/jobs/{report['id']}/pause")
    heartbeat = create_job(runtime, name="heartbeat", schedule="*/2 * * * * *", request={"url": ok.url + "/beat"})
    flaky_job = create_job(runtime, name="flaky-webhook", schedule="*/3 * * * * *", request={"url": flaky.url + "/hook"},
                           retry={"strategy": "fixed", "max_attempts": 2, "delay_seconds": 1})

    def runs(job: dict[str, Any]) -> list[dict[str, Any]]:
        return [r for r in job_runs(runtime, job["id"]) if r["finished_at"]]

    assert wait_for(lambda: len(runs(heartbeat)) >= 12 and len(runs(flaky_job)) >= 6, SEED_TIMEOUT_SECONDS,
                    interval=API_POLL_INTERVAL)
    failed = next(r for r in runs(flaky_job) if r["status"] == "failed")
    return {"heartbeat": heartbeat["id"], "flaky": flaky_job["id"], "failed_run": failed["id"]}


def photograph(runtime: LocalRuntime, ids: dict[str, str], chromium: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=20_000)
    OUT.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium)
        for device, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
            page = browser.new_context(viewport=viewport).new_page()
            page.goto(f"{runtime.api_url}/console")
            expect(page.get_by_label("API key")).to_be_visible()
            if device == "phone":
                page.screenshot(path=OUT / "sign-in-phone.png")
            page.get_by_label("API key").fill(runtime.api_key)
            page.get_by_role("button", name="Sign in").click()
            expect(page.locator("td[data-label='Lag p50']").filter(has_text="ms").first).to_be_visible()
            expect(page.locator("td[data-label='Success (last 50)']").filter(has_text="…")).to_have_count(0)
            page.screenshot(path=OUT / f"jobs-{device}.png")
            page.goto(f"{runtime.api_url}/console#/jobs/{ids['flaky']}")
            expect(page.locator("svg rect.mark").nth(5)).to_be_attached()
            expect(page.locator("td[data-label='Status code']").filter(has_text="—")).to_have_count(0)
            page.screenshot(path=OUT / f"job-{device}.png")
            page.goto(f"{runtime.api_url}/console#/runs/{ids['failed_run']}")
            expect(page.locator(".attempt").nth(1)).to_be_visible()
            page.screenshot(path=OUT / f"run-{device}.png")
            page.goto(f"{runtime.api_url}/console#/new")
            page.get_by_label("Name").fill("month-end-invoices")
            page.get_by_label("Schedule").fill("0 0 18 L * *")
            page.get_by_label("Time zone").fill("Europe/Berlin")
            expect(page.locator("#preview li")).to_have_count(5)
            page.screenshot(path=OUT / f"new-job-{device}.png")
            page.goto(f"{runtime.api_url}/console#/calendars/us-holidays")
            expect(page.get_by_role("link", name="weekly-digest")).to_be_visible()
            page.screenshot(path=OUT / f"calendar-{device}.png")
            page.context.close()
        browser.close()


def main() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="tickwork-screens-"))
    servers = resolve(workdir, keep_data=False)
    schema = f"screens_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(servers.database_url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    options = f"options=-csearch_path%3D{schema}"
    database_url = f"{servers.database_url}{'&' if '?' in servers.database_url else '?'}{options}"
    settings = Settings(database_url=database_url, redis_url=servers.redis_url, namespace=f"tickwork-{schema}",
                        allow_private_targets=True, key_file=str(workdir / "master.key"))  # a secret header is sealed
    ok, flaky = Target(), Target()
    flaky.default_status = 500
    flaky.response_body = b'{"error": "database is read-only during maintenance"}'
    flaky.statuses = [200, 200, 500, 200, 200, 200, 503, 200]
    runtime = LocalRuntime(settings, port=0)
    runtime.start()
    try:
        photograph(runtime, seed(runtime, ok, flaky), sys.argv[1] if len(sys.argv) > 1 else DEFAULT_CHROMIUM)
    finally:
        runtime.stop()
        ok.close()
        flaky.close()
        with psycopg.connect(servers.database_url, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
        servers.close()
    print(f"screenshots written to {OUT}")


if __name__ == "__main__":
    main()
