"""Stored rows to response bodies: RFC 3339 UTC times, secrets redacted, keyset positions as opaque cursors."""
from __future__ import annotations

from datetime import datetime
from typing import Any, Sequence, cast
from zoneinfo import ZoneInfo

from tickwork.api.models import Trigger
from tickwork.api.pagination import encode_cursor, fitted
from tickwork.api.responses import (
    AttemptOut,
    ExecutionDetail,
    ExecutionList,
    ExecutionOut,
    FireTime,
    JobDetail,
    JobList,
    JobOut,
    PreviewOut,
    ReplayOut,
)
from tickwork.models import Job, Page, part_json
from tickwork.rules import completion
from tickwork.rules.quarantine import ERRORED, shown_status
from tickwork.schedule.engine import Schedule
from tickwork.schedule.excluded import SlotDetail
from tickwork.schedule.specs import job_schedule
from tickwork.store.history import AttemptRow, ExecutionRow
from tickwork.rules.replay import MAX_IDS_LISTED
from tickwork.tenant import calendars as tenant_calendars
from tickwork.tenant import job_edits, jobs
from tickwork.tenant.history import ExecutionRecord
from tickwork.tenant.replays import Replayed
from tickwork.timeutil import rfc3339

UPCOMING_RUNS = 5


def _time(dt: datetime) -> str:
    formatted = rfc3339(dt)
    assert formatted is not None
    return formatted


def job_out(job: Job) -> JobOut:
    """Every field of the job the API shows, as stored; the request redacted, the quarantine only while it holds."""
    status = shown_status(job)
    stored = {name: _shown(getattr(job, name)) for name in JobOut.model_fields if hasattr(job, name)}
    errored = status == ERRORED
    return JobOut(**{
        **stored, "status": status, "request": job.request and job_edits.redacted_request(job.request),
        "completion": completion.shown(part_json(job.completion)),
        "error_reason": stored["error_reason"] if errored else None,
        "errored_at": stored["errored_at"] if errored else None,
    })


def _shown(value: Any) -> Any:
    return rfc3339(value) if isinstance(value, datetime) else part_json(value)


def job_detail(shown: jobs.JobWithCalendars) -> JobDetail:
    """A job with what it will do next: its schedule in words and its next runs (its calendars move or leave
    out some; none while it is in quarantine)."""
    job, calendars = shown.job, shown.calendars
    # In quarantine it is set aside: when it runs next is not known (its retry may fail again).
    upcoming = [] if shown_status(job) == ERRORED else tenant_calendars.upcoming_runs(job, calendars, UPCOMING_RUNS)
    return JobDetail(
        **job_out(job).model_dump(), schedule_description=job_schedule(job).describe(),
        next_fire_times=[_time(t) for t in upcoming],
    )


def job_list(page: Page[Job]) -> JobList:
    items, next_key = fitted(page, job_out)
    return JobList(items=items, next_cursor=encode_cursor("jobs", next_key))


def execution_out(execution: ExecutionRow) -> ExecutionOut:
    return ExecutionOut(
        id=execution.id, job_id=execution.job_id, scheduled_for=_time(execution.scheduled_for),
        trigger=cast(Trigger, execution.trigger), status=execution.status, attempt_count=execution.attempt_count,
        next_attempt_at=rfc3339(execution.next_attempt_at), created_at=_time(execution.created_at),
        started_at=rfc3339(execution.started_at), finished_at=rfc3339(execution.finished_at),
        last_error=execution.last_error, missed_count=execution.missed_count,
        replay_count=execution.replay_count, replayed_at=rfc3339(execution.replayed_at),
        completion_deadline=rfc3339(execution.completion_deadline) if execution.status == completion.AWAITING else None,
    )


def attempt_out(attempt: AttemptRow) -> AttemptOut:
    return AttemptOut(
        number=attempt.number, started_at=_time(attempt.started_at), duration_ms=attempt.duration_ms,
        status_code=attempt.status_code, error=attempt.error, response_body=attempt.response_body,
        response_truncated=attempt.response_truncated, output=attempt.output,
    )


def execution_detail(record: ExecutionRecord) -> ExecutionDetail:
    return ExecutionDetail(**execution_out(record.execution).model_dump(),
                           attempts=[attempt_out(a) for a in record.attempts])


def execution_list(page: Page[ExecutionRow]) -> ExecutionList:
    items, next_key = fitted(page, execution_out)
    return ExecutionList(items=items, next_cursor=encode_cursor("executions", next_key))


def replay_out(done: Replayed) -> ReplayOut:
    return ReplayOut(count=done.count, execution_ids=done.execution_ids,
                     execution_ids_truncated=done.count > MAX_IDS_LISTED, first_at=rfc3339(done.first_at),
                     last_at=rfc3339(done.last_at), dry_run=done.dry_run, at_replay_limit=done.at_limit)


def preview_out(schedule: Schedule, times: Sequence[datetime | SlotDetail], hash_key: str) -> PreviewOut:
    """`times`: plain instants, or slots with what a calendar did to them."""
    zone = ZoneInfo(schedule.timezone)
    return PreviewOut(
        schedule=schedule.canonical, timezone=schedule.timezone, description=schedule.describe(),
        fire_times=[_fire_time(t, zone) for t in times], hash_key=hash_key,
        offset_seconds=schedule.offset_seconds,
    )


def _fire_time(slot: datetime | SlotDetail, zone: ZoneInfo) -> FireTime:
    if isinstance(slot, datetime):
        return FireTime(utc=_time(slot), local=local_time(slot, zone))
    return FireTime(utc=_time(slot.at), local=local_time(slot.at, zone), excluded_by=slot.excluded_by,
                    moved_from=rfc3339(slot.moved_from))


def local_time(moment: datetime, zone: ZoneInfo) -> str:
    """ISO 8601 wall time with its offset, e.g. 2024-03-31T03:00:00.000+02:00."""
    return moment.astimezone(zone).isoformat(timespec="milliseconds")
