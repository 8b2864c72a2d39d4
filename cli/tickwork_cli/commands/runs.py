"""`tickwork runs ...`: runs (executions) listed, shown with their attempts, and followed as they end."""
from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from typing import Any

import click

from tickwork_cli import tables
from tickwork_cli.client import Client, segment
from tickwork_cli.commands.common import find_job, json_option, utc_option
from tickwork_cli.follow import Follower
from tickwork_cli.output import emit_json, zone
from tickwork_cli.session import client
from tickwork_cli.times import show, since_value

STATUSES = ("queued", "waiting", "running", "retrying", "succeeded", "failed", "skipped", "missed", "lost")
TAIL_PAGE = 200  # each poll reads the newest runs: one page of the API's largest size
RUN_COLUMNS = ("ID", "JOB", "SLOT", "TRIGGER", "STATUS", "ATTEMPTS", "FINISHED", "ERROR")


@click.group()
def runs() -> None:
    """Runs of jobs (the API's executions)."""


@runs.command("list")
@click.option("--job", help="Runs of this job (id or key).")
@click.option("--status", multiple=True, type=click.Choice(STATUSES), help="Repeatable.")
@click.option("--since", help="Slots at or after this time: RFC 3339 (2026-03-12T19:04:00Z) or an age (30m, 2h, 7d).")
@click.option("--limit", type=click.IntRange(1), default=50, show_default=True, help="At most this many.")
@json_option
@utc_option
def list_runs(job: str | None, status: tuple[str, ...], since: str | None, limit: int, as_json: bool,
              utc: bool) -> None:
    """List runs, newest slot first."""
    api = client()
    query = {"status": status or None, "job_id": _job_id(api, job),
             "since": since_value(since, datetime.now(timezone.utc)) if since else None}
    items = list(api.pages("/executions", query, limit))
    if as_json:
        emit_json(items)
    else:
        click.echo(tables.render(RUN_COLUMNS, [_row(run, utc) for run in items]))


@runs.command("show")
@click.argument("run_id", metavar="ID")
@json_option
@utc_option
def show_run(run_id: str, as_json: bool, utc: bool) -> None:
    """Show one run with its attempts."""
    run = client().get(f"/executions/{segment(run_id)}")
    if as_json:
        emit_json(run)
        return
    click.echo(tables.fields([
        ("id", run["id"]), ("job", run["job_id"]), ("slot", show(run["scheduled_for"], zone(utc))),
        ("trigger", run["trigger"]), ("status", run["status"]), ("attempts", run["attempt_count"]),
        ("started", show(run.get("started_at"), zone(utc))), ("finished", show(run.get("finished_at"), zone(utc))),
        ("error", run.get("last_error")),
    ]))
    attempts = run.get("attempts") or []
    if attempts:
        click.echo()
        click.echo(tables.render(("#", "STARTED", "MS", "STATUS", "ERROR"), [
            (a["number"], show(a.get("started_at"), zone(utc)), a.get("duration_ms"), a.get("status_code"),
             a.get("error")) for a in attempts]))


@runs.command("tail")
@click.option("--job", help="Runs of this job (id or key).")
@click.option("--interval", type=click.FloatRange(0.1), default=2.0, show_default=True, help="Seconds between polls.")
@click.option("--max", "max_runs", type=click.IntRange(1), help="Stop after this many runs.")
@json_option
@utc_option
def tail(job: str | None, interval: float, max_runs: int | None, as_json: bool, utc: bool) -> None:
    """Print runs as they end (Ctrl-C stops). With --json, one JSON object a line."""
    api = client()
    query = {"job_id": _job_id(api, job), "limit": TAIL_PAGE}
    follower = Follower()
    follower.start(api.get("/executions", query)["items"])
    printed = 0
    try:
        while True:
            time.sleep(interval)
            for run in follower.ended(api.get("/executions", query)["items"]):
                click.echo(json.dumps(run) if as_json else _tail_line(run, utc))
                printed += 1
                if printed == max_runs:
                    return
    except KeyboardInterrupt:
        return  # Ctrl-C is how a tail ends: exit 0


def _job_id(api: Client, job: str | None) -> str | None:
    return find_job(api, job)["id"] if job else None


def _row(run: dict[str, Any], utc: bool) -> tuple[Any, ...]:
    return (run["id"], run["job_id"], show(run["scheduled_for"], zone(utc)), run["trigger"], run["status"],
            run["attempt_count"], show(run.get("finished_at"), zone(utc)), run.get("last_error"))


def _tail_line(run: dict[str, Any], utc: bool) -> str:
    error = f"  {tables.cell(run['last_error'])}" if run.get("last_error") else ""
    return (f"{show(run.get('finished_at'), zone(utc))}  {run['status']:<9}  run {run['id']}  job {run['job_id']}"
            f"  slot {show(run['scheduled_for'], zone(utc))}  attempts {run['attempt_count']}{error}")
