"""Glue between jobs, their schedules and the due index. Pure where it can be: `now` is always passed in."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from tickwork.dueindex import DueIndex
from tickwork.models import JobRow
from tickwork.schedule import Schedule, from_spec, parse_schedule
from tickwork.timeutil import to_ms


def job_schedule(job: JobRow) -> Schedule:
    """The schedule of a stored job; rates count from start_at, else from the job's creation."""
    return parse_schedule(
        job.schedule, job.timezone, anchor=job.start_at or job.created_at, start_at=job.start_at, end_at=job.end_at
    )


def index_spec(schedule: Schedule, version: int) -> dict[str, Any]:
    """What the due index keeps per job: enough to compute its next slot, plus the version it belongs to."""
    return {"v": version, "s": schedule.spec()}


def schedule_of(spec: dict[str, Any]) -> Schedule:
    return from_spec(spec["s"])


def next_slot(schedule: Schedule, slot_ms: int, now_ms: int) -> int | None:
    """The score a job moves to once `slot_ms` is claimed.

    Normally the slot after the one being run. After an outage that slot may already be past: the job
    then jumps to its first future slot, so a long stop yields one catch-up run, not a burst.
    """
    nxt = schedule.next_after_ms(slot_ms)
    if nxt is not None and nxt <= now_ms:
        nxt = schedule.next_after_ms(now_ms)
    return nxt


def first_slot(schedule: Schedule, now: datetime) -> datetime | None:
    """Where a new, updated or resumed job starts: its first slot strictly in the future."""
    return schedule.next_after(now)


def index_job(index: DueIndex, job: JobRow, pipeline: Any = None) -> None:
    """Make the due index match a job already written to Postgres (the source of truth)."""
    if job.status != "active" or job.next_run_at is None:
        index.remove_job(job.id, pipeline)
        return
    spec = index_spec(job_schedule(job), job.version)
    index.put_job(job.id, spec, to_ms(job.next_run_at), pipeline)

