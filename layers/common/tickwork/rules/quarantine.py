"""A quarantined due-index entry (tickwork.dispatch.quarantine has the contract), decided without I/O: how long it
stays out of the claimable range, what its reason says, which state its job shows, and what releasing the job
means."""
from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum

from tickwork.models import Job
from tickwork.schedule import specs as scheduling
from tickwork.vocab import JobStatus

# The first failure waits this long: an entry put right meanwhile (a calendar or a spec rewritten) is tried
# again within seconds, while a poison entry costs at most one failed handling per 5 s instead of one per tick...
BACKOFF_MS = 5_000
# ...doubling with each failure in a row up to an hour (reached after the 11th): one that never heals costs
# 24 handlings a day, and a fix still counts within the hour without anyone acting (an operator's release or
# a change to the job counts at once).
MAX_BACKOFF_MS = 3_600_000
# What the API shows and the log carries: the step and the exception's type, never its message (it may quote
# the tenant's input: a member, a rule, a date), so nothing a tenant wrote or a secret is repeated.
MAX_REASON = 200
ERRORED = JobStatus.ERRORED  # the status the API shows for an active job in quarantine (stored: `active`)


class Step(StrEnum):
    """Where an entry's handling raised, as its reason names it."""

    MEMBER = "reading its due-index entry"
    PLAN = "planning its next slot"
    CALENDARS = "applying its calendars"
    CALENDAR = "reading a calendar it excludes by"
    SPEC = "restoring its schedule from Postgres"
    RECORD = "recording its slot"
    ADMIT = "admitting its run"


@dataclass(frozen=True)
class Failure:
    """A due-index entry whose handling raised, to be quarantined (tickwork.dispatch.quarantine)."""

    member: str
    score: int | None  # where it is in the due set now (the compare-and-set's expected score); None: claimed away
    reason: str
    tenant_id: str | None = None
    job_id: str | None = None


def backoff_ms(failures: int) -> int:
    """How long after its `failures`-th failure in a row an entry stays out of the claimable range."""
    return min(BACKOFF_MS << min(max(failures, 1) - 1, 30), MAX_BACKOFF_MS)


def backoff_steps() -> list[int]:
    """backoff_ms(1), backoff_ms(2), ... up to the cap: the table SQL indexes by a failure count (the last
    one serves every count past it)."""
    steps = [backoff_ms(1)]
    while steps[-1] < MAX_BACKOFF_MS:
        steps.append(backoff_ms(len(steps) + 1))
    return steps


def reason(step: Step, error: BaseException) -> str:
    """The exception's type and the step it stopped, bounded: e.g. `OverflowError while planning its next slot`."""
    return f"{type(error).__name__} while {step}"[:MAX_REASON]


def shown_status(job: Job) -> str:
    """The status the API shows: an active job in quarantine is `errored` (store.jobs filters by the same rule)."""
    return ERRORED if job.status == JobStatus.ACTIVE and job.error_reason is not None else job.status


def released(job: Job, now: datetime) -> Job:
    """The job out of quarantine: no error, and an active one back at its first slot after `now` (the slot it
    stopped at is behind it; a calendar moves it further where the caller applies one). A job not in
    quarantine is returned as it is."""
    if job.error_reason is None and job.retry_errored_at is None:
        return job
    cleared = replace(job, error_reason=None, errored_at=None, error_count=None, retry_errored_at=None)
    if job.status != JobStatus.ACTIVE:
        return cleared
    next_run_at = scheduling.first_slot(scheduling.job_schedule(job), now)
    return replace(cleared, next_run_at=next_run_at, status=JobStatus.ACTIVE if next_run_at else JobStatus.COMPLETED)
