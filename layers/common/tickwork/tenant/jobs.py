"""The job service: every change to a job goes to Postgres first (the source of truth), then to the due index.

Each call acts for one tenant at one instant (`Scope`); the caller reads the clock once per request and
nothing below does. A job of another tenant, a deleted job and a malformed id all look the same: not found.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Callable, Iterator, Mapping

from psycopg.errors import UniqueViolation

from tickwork.calendars.rules import Calendar
from tickwork.errors import ConflictError, NotFoundError
from tickwork.models import Job, JobDraft, Key, Page
from tickwork.rules.quarantine import released
from tickwork.schedule import hashing
from tickwork.dueindex import specs as dueindex_specs
from tickwork.schedule.engine import Schedule
from tickwork.scope import Scope
from tickwork.secrets import vault
from tickwork.secrets.crypto import require_keyring
from tickwork.store import executions as executions_store
from tickwork.store import history as history_store
from tickwork.store import jobs as jobs_store
from tickwork.store.filters import JobFilter
from tickwork.store.history import ExecutionRow
from tickwork.store.secrets import PgKeyStore
from tickwork.tenant import audit, calendars, quotas
from tickwork.tenant import job_edits as edits
from tickwork.tenant.lookup import found, parse_id
from tickwork.timeutil import to_ms
from tickwork.vocab import AuditAction


@dataclass(frozen=True)
class Edited:
    """A job as a change (`transition`) leaves it, and what the change opened of sealed header values, by sealed
    value (tickwork.secrets.vault.opened_headers): the secrets check does not open those again."""

    job: Job
    opened: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class JobWithCalendars:
    """A job and the calendars its `calendar` excludes by, in its order (what its next runs need:
    tickwork.api.views.job_detail), read on the connection that read or wrote the job."""

    job: Job
    calendars: tuple[Calendar, ...] = ()


# ---------------------------------------------------------------- jobs

def create_job(scope: Scope, draft: JobDraft, then: Callable[[Any, Job], None] | None = None) -> JobWithCalendars:
    """`then(conn, job)`: in the create's transaction, after the insert (what must not exist without the job)."""
    job = edits.new_job(scope, draft)
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
    dueindex_specs.index_job(scope.index, job)
    return created


def get_job(scope: Scope, job_id: str) -> JobWithCalendars:
    with scope.db.connection() as conn:
        job = found(jobs_store.get_job(conn, scope.tenant_id, parse_id(job_id, "job")), "job")
        return with_calendars(scope, conn, job)


def with_calendars(scope: Scope, conn: Any, job: Job) -> JobWithCalendars:
    """The job and its calendars as stored now (none for a job without `calendar`: no query)."""
    return JobWithCalendars(job, tuple(calendars.job_calendars(conn, scope.tenant_id, job.calendar)))


def list_jobs(scope: Scope, limit: int, before: Key | None, filters: JobFilter = JobFilter()) -> Page[Job]:
    """Newest first. One extra row is read to learn whether another page follows."""
    with scope.db.connection() as conn:
        rows = jobs_store.list_jobs(conn, scope.tenant_id, limit + 1, before, filters)
    return Page.of(rows, limit, lambda job: (job.created_at, job.id))


def update_job(scope: Scope, job_id: str, changes: Mapping[str, Any]) -> JobWithCalendars:
    """Apply a partial update (only the keys present in `changes`): tickwork.tenant.job_edits.patched's rules."""
    return transition(scope, job_id, lambda _, job: Edited(edits.patched(scope, job, changes)),
                      action=AuditAction.JOB_UPDATED)


def pause_job(scope: Scope, job_id: str) -> JobWithCalendars:
    """The job stops at once: its scheduled runs not started yet, retries included, are skipped, and those
    started ahead of their instant are dropped at it (the mark read by tickwork.runs.stops); a run in flight
    finishes its attempt and is not retried (tickwork.runs.bounds); manual runs go ahead."""
    paused = transition(scope, job_id, lambda _, job: Edited(edits.paused(job)),
                        then=lambda conn, job: executions_store.skip_scheduled(conn, job.id, scope.now),
                        action=AuditAction.JOB_PAUSED)
    scope.index.mark_stopped(paused.job.id, paused.job.status)
    return paused


def resume_job(scope: Scope, job_id: str) -> JobWithCalendars:
    resumed = transition(scope, job_id, lambda _, job: Edited(edits.resumed(job, scope.now)),
                         action=AuditAction.JOB_RESUMED)
    scope.index.clear_stopped(resumed.job.id)
    return resumed


def delete_job(scope: Scope, job_id: str, only_if: Callable[[Any, Job], bool] | None = None) -> bool:
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


def preview_schedule(
    scope: Scope, expression: str, timezone: str, count: int, after: datetime | None,
    start_at: datetime | None = None, end_at: datetime | None = None, per_job: tuple[str, int] | None = None,
) -> tuple[Schedule, list[datetime]]:
    """What a job created now with this schedule would do: its canonical form and next `count` runs.
    `per_job`: (job id, spread_seconds) for its H and spread; default the fixed preview key, no spread."""
    schedule = edits.parse(scope, expression, timezone, start_at, end_at, start_at or scope.now,
                           per_job or (hashing.PREVIEW_KEY, 0))
    return schedule, schedule.preview(after or scope.now, count)


# ---------------------------------------------------------------- writes

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
    scope: Scope, job_id: str, change: Callable[[Any, Job], Edited],
    then: Callable[[Any, Job], None] | None = None, action: AuditAction = AuditAction.JOB_UPDATED,
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
        dueindex_specs.index_job(scope.index, updated)
    return replace(shown, job=updated)


def replaced(scope: Scope, conn: Any, job: Job, draft: JobDraft, compare_sealed: bool = True) -> Edited:
    """PUT rules (tickwork.tenant.job_edits.redefined), where a sensitive header whose value is unchanged keeps its
    sealed value, so the same draft twice changes nothing; without `compare_sealed` no sealed value is opened, and
    one given other than as *** differs."""
    if draft.request is None:
        return Edited(edits.redefined(scope, job, draft))
    headers, opened = _kept_sealed(scope, conn, job, draft.request.headers, compare_sealed)
    return Edited(edits.redefined(scope, job, replace(draft, request=replace(draft.request, headers=headers))), opened)


def _kept_sealed(
    scope: Scope, conn: Any, job: Job, given: Mapping[str, str], compare: bool = True,
) -> tuple[dict[str, str], dict[str, str]]:
    """`given` headers where a sensitive one sent back as REDACTED, or (`compare`) with the value its sealed one
    opens to, keeps the stored (sealed) value; and what the stored sealed values opened to, by sealed value (none
    when nothing needed opening)."""
    stored = {} if job.request is None else job.request.headers
    headers = edits.keep_redacted(stored, given)
    sealed = {name: value for name, value in stored.items() if vault.is_sealed(value)}
    if not compare or not sealed or not any(name in sealed and headers[name] != sealed[name] for name in headers):
        return headers, {}
    opened = vault.opened_headers(require_keyring(scope.keyring), PgKeyStore(conn), job.tenant_id, job.id, sealed)
    kept = {name: sealed[name] if opened.get(name) == value else value for name, value in headers.items()}
    return kept, {sealed[name]: opened[name] for name in sealed}


def _with_secrets_checked(scope: Scope, conn: Any, job: Job, opened: Mapping[str, str] | None = None) -> Job:
    """The job as stored: the secrets it references exist and allow its host, it fits the bounds of what it
    may expand to, its sensitive header values are sealed. `opened`: as `Edited.opened`. A target's job has no request
    (its input names secrets the executor looks up, and refuses, as it renders each attempt)."""
    if job.request is None:
        return job
    request = job.request.to_dict()
    vault.check_request(scope.keyring, conn, scope.tenant_id, job.id, request, opened)
    sealed = vault.seal_request(scope.keyring, conn, scope.tenant_id, job.id, request)["headers"]
    return replace(job, request=replace(job.request, headers=sealed))


def _indexed(job: Job) -> tuple[Any, ...]:
    """What the due index holds of a job: a change to any of it must reach Redis."""
    return job.status, job.next_run_at, job.version, job.catchup, job.catchup_window_seconds, job.calendar


def _aimed_by_calendars(scope: Scope, conn: Any, job: Job, current: Job | None) -> JobWithCalendars:
    """A job whose calendar or next run changed: the calendars it names exist (400 naming
    `calendar.exclude.N`), and its next run is where they put it (tickwork.tenant.calendars.aimed); returned
    with those calendars."""
    checked = current is None or job.calendar != current.calendar
    found = calendars.job_calendars(conn, scope.tenant_id, job.calendar, check=checked)
    if current is None or job.next_run_at != current.next_run_at:
        job = calendars.aimed(job, found, scope.now)
    return JobWithCalendars(job, tuple(found))
