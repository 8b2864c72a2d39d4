"""`tickwork login`, `jobs ...` and `runs ...` against the local runtime, runs really sent to a local target;
and the installed entry point as a real process."""
from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import ROOT, Tickwork
from tests.conftest import Target
from tests.support import wait_for

# The runtime sends within a second of a slot; a run to a local target ends in milliseconds after that.
WAIT_SECONDS = 20.0
# Once a year, so the job runs only when a test runs it (a rate() runs at once, its grid starting at creation).
YEARLY = "0 0 0 1 1 *"
FINAL = {"succeeded", "failed", "skipped", "missed", "lost"}


def create_job(tickwork: Tickwork, key: str, url: str, schedule: str = YEARLY) -> dict[str, Any]:
    status, job = tickwork.api("PUT", f"/jobs/by-key/{key}", {"name": key, "schedule": schedule,
                                                              "request": {"method": "POST", "url": url}})
    assert status == 201, job
    return job


def finished_run(tickwork: Tickwork, run_id: str) -> dict[str, Any]:
    found: dict[str, Any] = {}

    def ended() -> bool:
        found.update(tickwork.json("runs", "show", run_id))
        return found["status"] in FINAL
    assert wait_for(ended, timeout=WAIT_SECONDS, interval=0.2), found
    return found


def test_jobs_commands_find_a_job_by_key_or_id_and_act_on_it(tickwork: Tickwork, target: Target) -> None:
    job = create_job(tickwork, "ping", target.url + "/hook")

    listed = tickwork.json("jobs", "list")
    by_key = tickwork.json("jobs", "get", "ping")
    by_id = tickwork.json("jobs", "get", job["id"])
    paused = tickwork.json("jobs", "pause", "ping")
    resumed = tickwork.json("jobs", "resume", job["id"])
    table = tickwork("jobs", "list", "--utc")

    assert [j["key"] for j in listed] == ["ping"]
    assert by_key["id"] == by_id["id"] == job["id"] and len(by_key["next_fire_times"]) == 5
    assert (paused["status"], resumed["status"]) == ("paused", "active")
    assert table.exit_code == 0
    header, row = table.stdout.splitlines()
    assert header.split() == ["KEY", "NAME", "STATUS", "SCHEDULE", "NEXT", "RUN", "ID"]
    assert row.split()[:3] == ["ping", "ping", "active"] and f" {job['schedule']} " in row
    assert row.endswith(job["id"]) and " UTC " in row

    deleted = tickwork("jobs", "delete", "ping", "--yes")
    missing = tickwork("jobs", "get", "ping")

    assert deleted.exit_code == 0 and f"Deleted job ping ({job['id']})" in deleted.stdout
    assert missing.exit_code == 1 and "(404 not_found)" in missing.stderr
    assert tickwork.api("GET", f"/jobs/{job['id']}")[0] == 404


@pytest.mark.slow
def test_a_run_started_from_the_cli_is_listed_and_shown_with_its_attempts(tickwork: Tickwork, target: Target) -> None:
    job = create_job(tickwork, "ping", target.url + "/hook")

    queued = tickwork.json("jobs", "run", "ping")
    run = finished_run(tickwork, queued["id"])
    listed = tickwork.json("runs", "list", "--job", "ping", "--status", "succeeded", "--since", "1h")
    shown = tickwork("runs", "show", queued["id"], "--utc")

    assert (queued["job_id"], queued["trigger"]) == (job["id"], "manual")
    assert (run["status"], [(a["number"], a["status_code"]) for a in run["attempts"]]) == ("succeeded", [(1, 200)])
    assert [r["id"] for r in listed] == [queued["id"]]
    assert target.requests[0]["headers"]["Tickwork-Run-Id"] == queued["id"]
    assert shown.exit_code == 0
    lines = shown.stdout.splitlines()
    assert f"id:       {queued['id']}" in lines and "status:   succeeded" in lines
    assert lines[lines.index("") + 1].split() == ["#", "STARTED", "MS", "STATUS", "ERROR"]
    assert lines[lines.index("") + 2].split()[0] == "1" and " UTC " in lines[lines.index("") + 2]
    assert tickwork.json("runs", "list", "--job", "ping", "--status", "failed") == []


@pytest.mark.slow
def test_runs_tail_prints_runs_as_they_end(tickwork: Tickwork, target: Target) -> None:
    job = create_job(tickwork, "every-second", target.url + "/tick", schedule="* * * * * *")

    result = tickwork("runs", "tail", "--job", "every-second", "--interval", "0.3", "--max", "2", "--json")

    assert result.exit_code == 0, result.output
    ended = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(ended) == 2 and len({r["id"] for r in ended}) == 2
    assert all(r["job_id"] == job["id"] and r["status"] == "succeeded" for r in ended)


def test_login_checks_the_key_and_keeps_it_for_later_commands(tickwork: Tickwork, tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path / "home-config"), "TICKWORK_API_URL": None, "TICKWORK_API_KEY": None}
    tickwork.env = env
    config = tmp_path / "home-config" / "tickwork" / "config.json"

    refused = tickwork("login", "--api-url", tickwork.runtime.api_url, "--stdin", input="tw_not-a-key\n")
    assert refused.exit_code == 1 and "refused this key" in refused.stderr
    assert not config.exists()

    prompted = tickwork("login", "--api-url", tickwork.runtime.api_url, input=tickwork.runtime.api_key + "\n")

    assert prompted.exit_code == 0, prompted.output
    assert tickwork.runtime.api_key not in prompted.output  # not echoed
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert json.loads(config.read_text()) == {"api_url": tickwork.runtime.api_url, "api_key": tickwork.runtime.api_key}
    assert tickwork.json("jobs", "list") == []


def cli_process(tickwork: Tickwork, *args: str, **env: str) -> subprocess.Popen[str]:
    """`python -m tickwork_cli`, as the installed `tickwork` script runs it."""
    path = os.pathsep.join(p for p in (str(ROOT / "cli"), os.environ.get("PYTHONPATH")) if p)
    variables = {**os.environ, "PYTHONPATH": path, **{k: v for k, v in tickwork.env.items() if v is not None}, **env}
    return subprocess.Popen([sys.executable, "-m", "tickwork_cli", *args], env=variables, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.slow
def test_the_entry_point_runs_as_a_process_tails_until_ctrl_c_and_shows_local_times(
        tickwork: Tickwork, target: Target) -> None:
    create_job(tickwork, "every-second", target.url + "/tick", schedule="* * * * * *")

    tail = cli_process(tickwork, "runs", "tail", "--interval", "0.3")
    assert tail.stdout is not None
    first = tail.stdout.readline()  # blocks until a run ends
    tail.send_signal(signal.SIGINT)
    out, err = tail.communicate(timeout=WAIT_SECONDS)
    shown = cli_process(tickwork, "jobs", "get", "every-second", TZ="Asia/Kolkata")
    local, _ = shown.communicate(timeout=WAIT_SECONDS)

    assert tail.returncode == 0, err
    assert " succeeded " in first and "job " in first
    assert shown.returncode == 0
    assert [line for line in local.splitlines() if line.startswith("updated:")][0].endswith("+05:30")


def test_jobs_get_shows_max_runs_with_the_runs_sent_and_the_end_action(tickwork: Tickwork, target: Target) -> None:
    """The job runs every second until its second run: `jobs get` shows the bound, what was sent of it, and
    what becomes of the job; a job without a bound shows none."""
    status, job = tickwork.api("PUT", "/jobs/by-key/twice", {
        "name": "twice", "schedule": "* * * * * *", "request": {"method": "POST", "url": target.url + "/t"},
        "max_runs": 2, "end_action": "none"})
    assert status == 201, job
    create_job(tickwork, "unbounded", target.url + "/u")
    assert wait_for(lambda: tickwork.json("jobs", "get", "twice")["status"] == "completed", timeout=WAIT_SECONDS)

    shown = tickwork("jobs", "get", "twice", "--utc")
    unbounded = tickwork("jobs", "get", "unbounded", "--utc")

    lines = dict(line.split(":", 1) for line in shown.stdout.splitlines() if ":" in line)
    assert (lines["max runs"].strip(), lines["end action"].strip(), lines["status"].strip()) == (
        "2 (2 sent)", "none", "completed")
    other = dict(line.split(":", 1) for line in unbounded.stdout.splitlines() if ":" in line)
    assert (other["max runs"].strip(), other["end action"].strip()) == ("-", "none")
