"""Glue between jobs, their schedules and the due index. Pure where it can be: `now` is always passed in."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from tickwork import policy
from tickwork.dueindex import DueIndex
from tickwork.models import JobRow
from tickwork.schedule import Schedule, from_spec, parse_schedule
from tickwork.timeutil import to_ms


def job_schedule(job: JobRow) -> Schedule:
    """The schedule of a stored job; rates count from start_at, else from the job's creation."""
    return parse_schedule(
        job.schedule, job.timezone, anchor=job.start_at or job.created_at, start_at=job.start_at, end_at=job.end_at
    )


def index_spec(
    schedule: Schedule, version: int, catchup_window_seconds: int = policy.DEFAULT_CATCHUP_WINDOW_SECONDS,
    catchup: str = policy.DEFAULT_CATCHUP,
) -> dict[str, Any]:
    """What the due index keeps per job: what the poller needs to plan a slot, and the version it is for."""
    return {"v": version, "s": schedule.spec(), "cw": catchup_window_seconds, "ca": catchup}


def schedule_of(spec: dict[str, Any]) -> Schedule:
    return from_spec(spec["s"])


def plan_claim(spec: dict[str, Any], schedule: Schedule, slot_ms: int, now_ms: int) -> policy.SlotPlan:
    """What claiming `slot_ms` means for the job whose index spec this is (see tickwork.policy)."""
    window_ms = int(spec.get("cw", policy.DEFAULT_CATCHUP_WINDOW_SECONDS)) * 1000
    return policy.plan_slot(schedule, slot_ms, now_ms, window_ms, spec.get("ca", policy.DEFAULT_CATCHUP))


def first_slot(schedule: Schedule, now: datetime) -> datetime | None:
    """Where a new, updated or resumed job starts: its first slot strictly in the future."""
    return schedule.next_after(now)


def job_spec(job: JobRow, schedule: Schedule | None = None) -> dict[str, Any]:
    """The index spec of a stored job (`schedule`: its parsed schedule, when the caller has it)."""
    return index_spec(schedule or job_schedule(job), job.version, job.catchup_window_seconds, job.catchup)


def index_job(index: DueIndex, job: JobRow, pipeline: Any = None) -> None:
    """Make the due index match a job already written to Postgres (the source of truth)."""
    if job.status != "active" or job.next_run_at is None:
        index.remove_job(job.id, pipeline)
        return
    index.put_job(job.id, job_spec(job), to_ms(job.next_run_at), pipeline)

