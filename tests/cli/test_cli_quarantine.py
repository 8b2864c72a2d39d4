"""`tickwork jobs` with a job in quarantine (tickwork.dispatch.quarantine), against the local runtime: listed by
`--status errored`, shown with its reason, and released by `jobs resume`."""
from __future__ import annotations

from datetime import datetime, timezone

import psycopg

from tests.cli.conftest import Tickwork
from tests.cli.test_cli_jobs_runs import create_job
from tests.conftest import Target
from tickwork.rules.quarantine import backoff_steps
from tickwork.settings import Settings
from tickwork.store import quarantine as quarantine_store

REASON = "OverflowError while applying its calendars"


def test_a_job_in_quarantine_is_listed_errored_shown_with_its_reason_and_resumed(
    tickwork: Tickwork, target: Target, settings: Settings,
) -> None:
    stuck = create_job(tickwork, "stuck", target.url + "/s")
    create_job(tickwork, "fine", target.url + "/f")
    with psycopg.connect(settings.database_url, autocommit=True) as conn:  # what the poller writes
        quarantine_store.set_aside(conn, {stuck["id"]: REASON}, datetime.now(timezone.utc), backoff_steps())

    assert [j["key"] for j in tickwork.json("jobs", "list", "--status", "errored")] == ["stuck"]
    assert [j["key"] for j in tickwork.json("jobs", "list", "--status", "active")] == ["fine"]
    shown = tickwork("jobs", "get", "stuck", "--utc")
    assert shown.exit_code == 0 and f"errored ({REASON})" in shown.stdout

    resumed = tickwork.json("jobs", "resume", "stuck")
    assert (resumed["status"], resumed["error_reason"]) == ("active", None)
