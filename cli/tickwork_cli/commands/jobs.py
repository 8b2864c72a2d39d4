"""`tickwork jobs ...`: list, read, pause, resume, run and delete jobs (by id or key)."""
from __future__ import annotations

from typing import Any

import click

from tickwork_cli import tables
from tickwork_cli.client import segment
from tickwork_cli.commands.common import find_job, json_option, utc_option
from tickwork_cli.output import emit_json, zone
from tickwork_cli.session import client
from tickwork_cli.times import show

JOB = click.argument("job", metavar="JOB")  # an id or a key


@click.group()
def jobs() -> None:
    """Jobs: JOB is a job's id or its key."""


@jobs.command("list")
@click.option("--status", multiple=True, type=click.Choice(["active", "paused", "completed", "errored"]),
              help="Repeatable.")
@click.option("--tag", multiple=True, help="Jobs carrying every tag given. Repeatable.")
@click.option("--source", help="Jobs of this source label (a jobs file's).")
@click.option("--limit", type=click.IntRange(1), help="At most this many (default: all).")
@json_option
@utc_option
def list_jobs(status: tuple[str, ...], tag: tuple[str, ...], source: str | None, limit: int | None,
              as_json: bool, utc: bool) -> None:
    """List jobs, newest first."""
    query = {"status": status or None, "tag": tag or None, "source": source}
    items = list(client().pages("/jobs", query, limit))
    if as_json:
        emit_json(items)
        return
    rows = [(j.get("key"), j["name"], j["status"], j["schedule"], show(j.get("next_run_at"), zone(utc)), j["id"])
            for j in items]
    click.echo(tables.render(("KEY", "NAME", "STATUS", "SCHEDULE", "NEXT RUN", "ID"), rows))


@jobs.command("get")
@JOB
@json_option
@utc_option
def get_job(job: str, as_json: bool, utc: bool) -> None:
    """Show one job and its next runs."""
    _print_job(find_job(client(), job), as_json, utc)


@jobs.command("pause")
@JOB
@json_option
@utc_option
def pause(job: str, as_json: bool, utc: bool) -> None:
    """Stop a job's schedule (manual runs still go)."""
    _print_job(_act(job, "pause"), as_json, utc)


@jobs.command("resume")
@JOB
@json_option
@utc_option
def resume(job: str, as_json: bool, utc: bool) -> None:
    """Run a paused job again from its next slot."""
    _print_job(_act(job, "resume"), as_json, utc)


@jobs.command("run")
@JOB
@json_option
def run(job: str, as_json: bool) -> None:
    """Run a job once, now (follow it with `tickwork runs show ID`)."""
    execution = _act(job, "run")
    if as_json:
        emit_json(execution)
    else:
        click.echo(f"Queued run {execution['id']} of job {job} (follow it: tickwork runs show {execution['id']})")


@jobs.command("delete")
@JOB
@click.option("--yes", "-y", is_flag=True, help="Do not ask.")
@json_option
def delete(job: str, yes: bool, as_json: bool) -> None:
    """Delete a job (its runs stay readable)."""
    api = client()
    found = find_job(api, job)
    if not yes:
        click.confirm(f"Delete job {found['name']} ({found['id']})?", abort=True, err=True)
    api.request("DELETE", f"/jobs/{segment(found['id'])}")
    if as_json:
        emit_json({"deleted": found["id"], "key": found.get("key")})
    else:
        click.echo(f"Deleted job {found['name']} ({found['id']})")


def _act(ref: str, action: str) -> Any:
    api = client()
    return api.request("POST", f"/jobs/{segment(find_job(api, ref)['id'])}/{action}")


def _print_job(job: dict[str, Any], as_json: bool, utc: bool) -> None:
    if as_json:
        emit_json(job)
        return
    request = job["request"]
    click.echo(tables.fields([
        ("id", job["id"]), ("key", job.get("key")), ("source", job.get("source")), ("name", job["name"]),
        ("status", job["status"] + (f" ({job.get('paused_reason') or job.get('error_reason')})"
                                    if job.get("paused_reason") or job.get("error_reason") else "")),
        ("schedule", f"{job['schedule']} ({job['timezone']})"),
        ("request", f"{request['method']} {request['url']}"),
        ("retry", "{strategy}, {max_attempts} attempts, {delay_seconds}s".format(**job["retry"])),
        ("max runs", _max_runs(job)), ("end action", job.get("end_action", "none")),
        ("tags", ", ".join(job.get("tags") or []) or None), ("version", job["version"]),
        ("updated", show(job.get("updated_at"), zone(utc))),
        ("next runs", "\n".join(show(t, zone(utc)) for t in job.get("next_fire_times") or []) or None),
    ]))


def _max_runs(job: dict[str, Any]) -> str | None:
    """How many of its max_runs scheduled runs the job has sent; None without a bound."""
    if job.get("max_runs") is None:
        return None
    return f"{job['max_runs']} ({job.get('runs_sent', 0)} sent)"
