"""The job service: every change to a job goes to Postgres first (the source of truth), then to the due index.

Each call acts for one tenant at one instant (`Scope`); the caller reads the clock once per request and
nothing below does. A job of another tenant, a deleted job and a malformed id all look the same: not found.
"""
from __future__ import annotations

import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Callable, Iterator, Mapping, TypeVar

from psycopg.errors import UniqueViolation

from tickwork.calendars.rules import Calendar
from tickwork.errors import ConflictError, InvalidInputError, NotFoundError, ScheduleError, UnsafeTargetError
from tickwork.http.redaction import REDACTED, is_sensitive_header
from tickwork.http.targets import validate_target_url
from tickwork.models import JobRow, Key, Page
from tickwork.rules import policy
from tickwork.rules import completion
from tickwork.rules.quarantine import released
from tickwork.schedule import hashing
from tickwork.schedule import specs as scheduling
from tickwork.schedule.engine import Schedule, min_gap_seconds, parse_schedule
from tickwork.scope import Scope
from tickwork.secrets import vault
from tickwork.secrets.crypto import require_keyring
from tickwork.settings import Settings
from tickwork.store import executions as executions_store
from tickwork.store import history as history_store
from tickwork.store import jobs as jobs_store
from tickwork.store.filters import JobFilter
from tickwork.store.history import ExecutionRow
from tickwork.store.secrets import PgKeyStore
from tickwork.tenant import audit, calendars, quotas
from tickwork.tenant.lookup import found, parse_id
from tickwork.timeutil import to_ms
from tickwork.vocab import AuditAction, JobStatus

# Owned by the HTTP client (framing) or by the executor (run identity); a job may not set them.
_RESERVED_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "te", "trailer", "upgrade",
     "proxy-connection"}
)
_RESERVED_PREFIX = "tickwork-"
_TIMING_FIELDS = ("schedule", "timezone", "start_at", "end_at", "spread_seconds", "calendar")
# Fields a PATCH replaces as given (pydantic has already checked them).
_PLAIN_FIELDS = ("name", "overlap", "catchup", "catchup_window_seconds", "tags", "description", "pause_after_failures",
                 "success", "source")

T = TypeVar("T")


@dataclass(frozen=True)
class JobDraft:
    """A validated job body: `request` and `retry` as stored (see docs/api.md for their fields)."""

    name: str
    schedule: str
    timezone: str
    start_at: datetime | None
    end_at: datetime | None
    request: dict[str, Any]
    retry: dict[str, Any]
    overlap: str = policy.DEFAULT_OVERLAP
    catchup: str = policy.DEFAULT_CATCHUP
    catchup_window_seconds: int = policy.DEFAULT_CATCHUP_WINDOW_SECONDS
    tags: tuple[str, ...] = ()
    description: str = ""
    notify: dict[str, Any] | None = None
    pause_after_failures: int | None = None
    success: dict[str, Any] | None = None
    key: str | None = None
    source: str | None = None
    spread_seconds: int = 0
    completion: dict[str, Any] | None = None
    calendar: dict[str, Any] | None = None


@dataclass(frozen=True)
class Edited:
    """A job as a change (`transition`) leaves it, and what the change opened of sealed header values, by sealed
    value (tickwork.secrets.vault.opened_headers): the secrets check does not open those again."""

    job: JobRow
    opened: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class JobWithCalendars:
    """A job and the calendars its `calendar` excludes by, in its order (what its next runs need:
    tickwork.api.views.job_detail), read on the connection that read or wrote the job."""

    job: JobRow
    calendars: tuple[Calendar, ...] = ()


# ---------------------------------------------------------------- jobs

def create_job(scope: Scope, draft: JobDraft, then: Callable[[Any, JobRow], None] | None = None) -> JobWithCalendars:
    """`then(conn, job)`: in the create's transaction, after the insert (what must not exist without the job)."""
    job = new_job(scope, draft)
    with scope.db.connection() as conn, conn.transaction():
        quotas.enforce(conn, scope.settings, None, job)
        job = _with_secrets_checked(scope, conn, job)
        created = _aimed_by_calendars(scope, conn, job, None)
        job = created.job
        with _key_taken(job.key):
            jobs_store.insert_job(conn, job)
        if then is not None:
            then(conn, job)
        audit.record(conn, scope, AuditAction.JOB_CREATED, job_id=job.id, target=job.name,
                     changes=audit.created_fields(job))
    scheduling.index_job(scope.index, job)
    return created


def new_job(scope: Scope, draft: JobDraft) -> JobRow:
    """The job a create would store (its sensitive headers not sealed yet), checked; nothing is written."""
    job_id = str(uuid.uuid4())  # first: the schedule's H and spread offset are derived from it
    schedule = _parse(scope, draft.schedule, draft.timezone, draft.start_at, draft.end_at, draft.start_at or scope.now,
                      (job_id, draft.spread_seconds))
    _check_catchup_window(schedule, draft.catchup_window_seconds)
    job = JobRow(
        id=job_id, tenant_id=scope.tenant_id, name=draft.name, schedule=schedule.canonical,
        timezone=schedule.timezone, start_at=draft.start_at, end_at=draft.end_at,
        request=_checked_request(scope.settings, draft.request), retry=dict(draft.retry), status=JobStatus.ACTIVE,
        next_run_at=None, version=1, created_at=scope.now, updated_at=scope.now, overlap=draft.overlap,
        catchup=draft.catchup, catchup_window_seconds=draft.catchup_window_seconds, tags=list(draft.tags),
        description=draft.description,
        notify=_checked_notify(scope.settings, draft.notify), pause_after_failures=draft.pause_after_failures,
        success=draft.success, key=draft.key, source=draft.source, spread_seconds=draft.spread_seconds,
        completion=_checked_completion(draft.completion),
        calendar=draft.calendar,
    )
    return replace(job, next_run_at=_require_run(job, scope.now))


def get_job(scope: Scope, job_id: str) -> JobWithCalendars:
    with scope.db.connection() as conn:
        job = found(jobs_store.get_job(conn, scope.tenant_id, parse_id(job_id, "job")), "job")
        return with_calendars(scope, conn, job)


def with_calendars(scope: Scope, conn: Any, job: JobRow) -> JobWithCalendars:
    """The job and its calendars as stored now (none for a job without `calendar`: no query)."""
    return JobWithCalendars(job, tuple(calendars.job_calendars(conn, scope.tenant_id, job.calendar)))


def list_jobs(scope: Scope, limit: int, before: Key | None, filters: JobFilter = JobFilter()) -> Page[JobRow]:
    """Newest first. One extra row is read to learn whether another page follows."""
    with scope.db.connection() as conn:
        rows = jobs_store.list_jobs(conn, scope.tenant_id, limit + 1, before, filters)
    return Page.of(rows, limit, lambda job: (job.created_at, job.id))


def update_job(scope: Scope, job_id: str, changes: Mapping[str, Any]) -> JobWithCalendars:
    """Apply a partial update (only the keys present in `changes`); see `_apply` for the rules."""
    return transition(scope, job_id, lambda _, job: Edited(_apply(scope, job, changes)), action=AuditAction.JOB_UPDATED)


def pause_job(scope: Scope, job_id: str) -> JobWithCalendars:
    """The job stops at once: its scheduled runs not started yet, retries included, are skipped, and those
    started ahead of their instant are dropped at it (the mark read by tickwork.runs.stops); a run in flight
    finishes its attempt and is not retried (tickwork.runs.bounds); manual runs go ahead."""
    paused = transition(scope, job_id, lambda _, job: Edited(_paused(job)),
                        then=lambda conn, job: executions_store.skip_scheduled(conn, job.id, scope.now),
                        action=AuditAction.JOB_PAUSED)
    scope.index.mark_stopped(paused.job.id, paused.job.status)
    return paused


def resume_job(scope: Scope, job_id: str) -> JobWithCalendars:
    resumed = transition(scope, job_id, lambda _, job: Edited(_resumed(job, scope.now)), action=AuditAction.JOB_RESUMED)
    scope.index.clear_stopped(resumed.job.id)
    return resumed


def delete_job(scope: Scope, job_id: str, only_if: Callable[[Any, JobRow], bool] | None = None) -> bool:
    """Soft delete: the job stops running and disappears from the API; its executions are kept. `only_if(conn,
    job)`, asked with the job's row locked in the delete's transaction, may keep it (False returned)."""
    job_id = parse_id(job_id, "job")
    with scope.db.connection() as conn, conn.transaction():
        if only_if and not only_if(conn, found(jobs_store.get_job(conn, scope.tenant_id, job_id, lock=True), "job")):
            return False
        name = jobs_store.delete_job(conn, scope.tenant_id, job_id, scope.now)
        if name is None:
            raise NotFoundError("job not found")
        audit.record(conn, scope, AuditAction.JOB_DELETED, job_id=job_id, target=name)
    scope.index.remove_job(job_id)
    scope.index.mark_stopped(job_id, "deleted")  # its runs started ahead are dropped at their instant
    return True


def run_job(scope: Scope, job_id: str) -> ExecutionRow:
    """Fire once now, outside the schedule (paused jobs too): the poller dispatches it within a tick."""
    job_id = parse_id(job_id, "job")
    with scope.db.connection() as conn, conn.transaction():
        # The row lock keeps a concurrent delete from slipping in between the check and the insert.
        job = found(jobs_store.get_job(conn, scope.tenant_id, job_id, lock=True), "job")
        execution_id = executions_store.insert_manual(conn, scope.tenant_id, job.id, scope.now)
        execution = found(history_store.get_execution(conn, scope.tenant_id, execution_id), "execution")
        audit.record(conn, scope, AuditAction.JOB_RUN, job_id=job.id, target=execution_id)
    scope.index.schedule_execution(execution_id, 1, to_ms(scope.now))
    return execution


def upcoming_runs(job: JobRow, count: int) -> list[datetime]:
    """The next `count` fire times of a job that will fire; empty for paused and completed jobs."""
    if job.status != JobStatus.ACTIVE or job.next_run_at is None or count < 1:
        return []
    return [job.next_run_at, *scheduling.job_schedule(job).preview(job.next_run_at, count - 1)]


def preview_schedule(
    scope: Scope, expression: str, timezone: str, count: int, after: datetime | None,
    start_at: datetime | None = None, end_at: datetime | None = None, per_job: tuple[str, int] | None = None,
) -> tuple[Schedule, list[datetime]]:
    """What a job created now with this schedule would do: its canonical form and next `count` runs.
    `per_job`: (job id, spread_seconds) for its H and spread; default the fixed preview key, no spread."""
    schedule = _parse(scope, expression, timezone, start_at, end_at, start_at or scope.now,
                      per_job or (hashing.PREVIEW_KEY, 0))
    return schedule, schedule.preview(after or scope.now, count)


# ---------------------------------------------------------------- secrets in headers

def redacted_request(request: Mapping[str, Any]) -> dict[str, Any]:
    """The request as it may be shown: sensitive header values replaced by REDACTED."""
    headers = {k: REDACTED if is_sensitive_header(k) else v for k, v in request.get("headers", {}).items()}
    return {**request, "headers": headers}


def keep_redacted(stored: Mapping[str, str], given: Mapping[str, str]) -> dict[str, str]:
    """Headers from an update, where a sensitive header sent back as REDACTED keeps its stored value.

    Clients edit a job by sending back what they read; without this they would overwrite a secret with ***.
    """
    old = {k.lower(): v for k, v in stored.items()}
    return {
        k: old[k.lower()] if v == REDACTED and is_sensitive_header(k) and k.lower() in old else v
        for k, v in given.items()
    }


# ---------------------------------------------------------------- rules

@contextmanager
def _key_taken(key: str | None) -> Iterator[None]:
    """A write that would give two live jobs of a tenant one key (jobs_tenant_key) is a 409 naming `key`."""
    try:
        yield
    except UniqueViolation as exc:
        if key is None or getattr(exc.diag, "constraint_name", None) != "jobs_tenant_key":
            raise
        raise ConflictError(f"a job with key {key!r} exists already", field="key") from None


def transition(
    scope: Scope, job_id: str, change: Callable[[Any, JobRow], Edited],
    then: Callable[[Any, JobRow], None] | None = None, action: AuditAction = AuditAction.JOB_UPDATED,
) -> JobWithCalendars:
    """Read the job under a row lock, `change(conn, job)` it, write it back (and `then(conn, job)` in the same
    transaction, when it changed) with an audit entry of `action` naming what changed, then make the due index
    match. A change that changes nothing shown (a no-op update, resuming an active job) records nothing. The job
    comes back with its calendars, read in the same transaction."""
    job_id = parse_id(job_id, "job")
    with scope.db.connection() as conn, conn.transaction():
        current = found(jobs_store.get_job(conn, scope.tenant_id, job_id, lock=True), "job")
        edited = change(conn, current)
        updated = released(edited.job, scope.now)  # any change takes a job out of quarantine
        if updated.request != current.request:
            updated = _with_secrets_checked(scope, conn, updated, edited.opened)
        if updated.calendar and (updated.calendar, updated.next_run_at) != (current.calendar, current.next_run_at):
            shown = _aimed_by_calendars(scope, conn, updated, current)
        else:
            shown = with_calendars(scope, conn, updated)
        updated = shown.job
        if updated != current:
            quotas.enforce(conn, scope.settings, current, updated)
            updated = replace(updated, updated_at=scope.now)
            with _key_taken(updated.key):
                jobs_store.update_job(conn, updated)
            if then is not None:
                then(conn, updated)
            changed = audit.job_changes(current, updated)
            if changed:
                audit.record(conn, scope, action, job_id=updated.id, target=updated.name, changes=changed)
    if _indexed(updated) != _indexed(current):
        scheduling.index_job(scope.index, updated)
    return replace(shown, job=updated)


def _apply(scope: Scope, job: JobRow, changes: Mapping[str, Any]) -> JobRow:
    """PATCH rules: `request` and `retry` merge into what is stored; a change of schedule, time zone or window
    bumps the version (so a poller holding the old spec cannot advance the new one) and restarts the job
    at its first slot after now. A paused job stays paused; a completed job becomes active again. A key is
    set once."""
    updated = replace(job, **{name: changes[name] for name in _PLAIN_FIELDS if name in changes})
    if changes.get("key") is not None and changes["key"] != job.key:
        if job.key is not None:
            raise InvalidInputError("key", f"cannot change once set (it is {job.key!r}): create a job with the new key")
        updated = replace(updated, key=changes["key"])
    if "request" in changes:
        merged = _merged_request(job.request, changes["request"])
        updated = replace(updated, request=_checked_request(scope.settings, merged))
    if "retry" in changes:
        updated = replace(updated, retry={**job.retry, **changes["retry"]})
    if "notify" in changes:
        updated = replace(updated, notify=_checked_notify(scope.settings, changes["notify"]))
    if "completion" in changes:
        updated = replace(updated, completion=_checked_completion(changes["completion"]))
    if any(name in changes for name in _TIMING_FIELDS):
        updated = _rescheduled(scope, updated, changes)
    if "schedule" in changes or "catchup_window_seconds" in changes:
        _check_catchup_window(scheduling.job_schedule(updated), updated.catchup_window_seconds)
    return updated


def replaced(scope: Scope, conn: Any, job: JobRow, draft: JobDraft, compare_sealed: bool = True) -> Edited:
    """PUT rules: the whole definition is the draft's (a field left out takes its default), under the PATCH rules
    for timing (the version moves only when schedule, time zone or window do) and for state (a paused job stays
    paused). A sensitive header whose value is unchanged keeps its sealed value, so the same draft twice changes
    nothing; without `compare_sealed` no sealed value is opened, and one given other than as *** differs."""
    request = dict(draft.request)
    given = draft.request.get("headers") or {}
    request["headers"], opened = _kept_sealed(scope, conn, job, given, compare_sealed)
    updated = replace(
        job, name=draft.name, request=_checked_request(scope.settings, request), retry=dict(draft.retry),
        overlap=draft.overlap, catchup=draft.catchup, catchup_window_seconds=draft.catchup_window_seconds,
        tags=list(draft.tags), description=draft.description, notify=_checked_notify(scope.settings, draft.notify),
        pause_after_failures=draft.pause_after_failures, success=draft.success, source=draft.source,
        completion=_checked_completion(draft.completion),
    )
    updated = _rescheduled(scope, updated, {name: getattr(draft, name) for name in _TIMING_FIELDS})
    _check_catchup_window(scheduling.job_schedule(updated), updated.catchup_window_seconds)
    return Edited(updated, opened)


def _kept_sealed(
    scope: Scope, conn: Any, job: JobRow, given: Mapping[str, str], compare: bool = True,
) -> tuple[dict[str, str], dict[str, str]]:
    """`given` headers where a sensitive one sent back as REDACTED, or (`compare`) with the value its sealed one
    opens to, keeps the stored (sealed) value; and what the stored sealed values opened to, by sealed value (none
    when nothing needed opening)."""
    stored = job.request.get("headers") or {}
    headers = keep_redacted(stored, given)
    sealed = {name: value for name, value in stored.items() if vault.is_sealed(value)}
    if not compare or not sealed or not any(name in sealed and headers[name] != sealed[name] for name in headers):
        return headers, {}
    opened = vault.opened_headers(require_keyring(scope.keyring), PgKeyStore(conn), job.tenant_id, job.id, sealed)
    kept = {name: sealed[name] if opened.get(name) == value else value for name, value in headers.items()}
    return kept, {sealed[name]: opened[name] for name in sealed}


def _rescheduled(scope: Scope, job: JobRow, changes: Mapping[str, Any]) -> JobRow:
    timing = {name: changes.get(name, getattr(job, name)) for name in _TIMING_FIELDS}
    anchor = timing["start_at"] or job.created_at
    schedule = _parse(scope, timing["schedule"], timing["timezone"], timing["start_at"], timing["end_at"], anchor,
                      (job.id, timing["spread_seconds"]))
    moved = replace(job, schedule=schedule.canonical, timezone=schedule.timezone, start_at=timing["start_at"],
                    end_at=timing["end_at"], spread_seconds=timing["spread_seconds"], calendar=timing["calendar"])
    if _timing(moved) == _timing(job):
        return job
    moved = replace(moved, version=job.version + 1)
    if job.status == JobStatus.PAUSED:
        return moved
    return replace(moved, status=JobStatus.ACTIVE, next_run_at=_require_run(moved, scope.now))


def _check_catchup_window(schedule: Schedule, window_seconds: int) -> None:
    limit = policy.max_catchup_window_seconds(min_gap_seconds(schedule))
    if limit is not None and window_seconds > limit:
        raise InvalidInputError("catchup_window_seconds", (
            f"must be at most {limit} for this schedule: {policy.MAX_CATCHUP_SLOTS} of its runs (a week of a "
            "per-minute job), so catching up after an outage stays bounded"))


def _with_secrets_checked(scope: Scope, conn: Any, job: JobRow, opened: Mapping[str, str] | None = None) -> JobRow:
    """The job as stored: the secrets it references exist and allow its host, it fits the bounds of what it
    may expand to, its sensitive header values are sealed. `opened`: as `Edited.opened`."""
    vault.check_request(scope.keyring, conn, scope.tenant_id, job.id, job.request, opened)
    return replace(job, request=vault.seal_request(scope.keyring, conn, scope.tenant_id, job.id, job.request))


def _paused(job: JobRow) -> JobRow:
    if job.status == JobStatus.COMPLETED:
        raise ConflictError("a completed job cannot be paused; give it a new schedule to run it again")
    return replace(job, status=JobStatus.PAUSED, next_run_at=None)


def _resumed(job: JobRow, now: datetime) -> JobRow:
    """Back to the first slot after now: runs missed while paused are skipped, not replayed in a burst."""
    if job.status == JobStatus.COMPLETED:
        raise ConflictError("a completed job cannot be resumed; give it a new schedule to run it again")
    if job.status == JobStatus.ACTIVE:
        return job
    next_run_at = scheduling.first_slot(scheduling.job_schedule(job), now)
    status = JobStatus.ACTIVE if next_run_at else JobStatus.COMPLETED
    return replace(job, status=status, next_run_at=next_run_at, paused_reason=None)


def _indexed(job: JobRow) -> tuple[Any, ...]:
    """What the due index holds of a job: a change to any of it must reach Redis."""
    return job.status, job.next_run_at, job.version, job.catchup, job.catchup_window_seconds, job.calendar


def _timing(job: JobRow) -> tuple[Any, ...]:
    return job.schedule, job.timezone, job.start_at, job.end_at, job.spread_seconds, job.calendar


def _aimed_by_calendars(scope: Scope, conn: Any, job: JobRow, current: JobRow | None) -> JobWithCalendars:
    """A job whose calendar or next run changed: the calendars it names exist (400 naming
    `calendar.exclude.N`), and its next run is where they put it (tickwork.tenant.calendars.aimed); returned
    with those calendars."""
    checked = current is None or job.calendar != current.calendar
    found = calendars.job_calendars(conn, scope.tenant_id, job.calendar, check=checked)
    if current is None or job.next_run_at != current.next_run_at:
        job = calendars.aimed(job, found, scope.now)
    return JobWithCalendars(job, tuple(found))


def _parse(
    scope: Scope, expression: str, timezone: str, start_at: datetime | None, end_at: datetime | None,
    anchor: datetime, per_job: tuple[str, int],
) -> Schedule:
    """`anchor` must be what `scheduling.job_schedule` will use for the stored job: start_at, else created_at;
    `per_job` its (id, spread_seconds)."""
    return parse_schedule(
        expression, timezone, anchor=anchor, start_at=start_at, end_at=end_at, now=scope.now,
        min_interval_seconds=scope.settings.min_interval_seconds, hash_key=per_job[0], spread_seconds=per_job[1],
    )


def _require_run(job: JobRow, now: datetime) -> datetime:
    """The first slot after now of a job being created or rescheduled; one that would never run is refused."""
    next_run_at = scheduling.first_slot(scheduling.job_schedule(job), now)
    if next_run_at is not None:
        return next_run_at
    if job.end_at is not None and job.end_at <= now:
        raise ScheduleError("end_at is in the past", "end_at")
    raise ScheduleError("the schedule has no run after now", "schedule")


def _merged_request(stored: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    merged = {**stored, **patch}
    if "headers" in patch:
        merged["headers"] = keep_redacted(stored.get("headers", {}), patch["headers"])
    return merged


def _checked_request(settings: Settings, request: Mapping[str, Any]) -> dict[str, Any]:
    """The request as stored: URL through the SSRF guard, timeout within the deployment's cap, method set."""
    checked = dict(request)
    checked["url"] = validate_target_url(request["url"], settings.allow_private_targets, settings.target_ports)
    if request.get("timeout_seconds", 0) > settings.max_request_timeout_seconds:
        raise InvalidInputError(
            "request.timeout_seconds", f"must be at most {settings.max_request_timeout_seconds} seconds"
        )
    for name in request.get("headers", {}):
        if name.lower() in _RESERVED_HEADERS or name.lower().startswith(_RESERVED_PREFIX):
            raise InvalidInputError(f"request.headers.{name}", f"the {name} header cannot be set on a job")
    if checked.get("method") is None:
        checked["method"] = "POST" if checked.get("body") is not None else "GET"
    return checked


def _checked_completion(given: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """As stored (tickwork.rules.completion.stored); a timeout is for callback mode only."""
    if given and given.get("timeout_seconds") is not None and not completion.is_callback(given):
        raise InvalidInputError("completion.timeout_seconds", "is only for mode callback")
    return completion.stored(given)


def _checked_notify(settings: Settings, notify: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The notification target goes through the same SSRF guard as a job's URL."""
    if notify is None:
        return None
    try:
        url = validate_target_url(notify["url"], settings.allow_private_targets, settings.target_ports)
    except UnsafeTargetError as exc:
        raise UnsafeTargetError(exc.message, "notify.url") from None
    except InvalidInputError as exc:
        raise InvalidInputError("notify.url", exc.message) from None
    return {**notify, "url": url}
