"""Jobs by their key: what a jobs file (the CLI's plan/apply) and a CloudFormation resource work with.

A PUT names the whole definition of the job with that key: it creates the job, or replaces what differs, or
changes nothing (same version, same updated_at) when nothing does. A plan computes the same thing and writes
nothing. Deleted jobs free their key; another tenant's key is not found, as its ids are.

A plan compares sealed header values only for a key that may write the job: a reader's plan would otherwise
be a password oracle (`unchanged` for the right guess). A writer learns nothing new from it (it could point
the job at its own host and read the header there), but each plan that opened a sealed value is logged.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Callable, Literal

from aws_lambda_powertools import Logger

from tickwork.errors import ConflictError, InvalidInputError, NotFoundError
from tickwork.http.redaction import REDACTED
from tickwork.models import Job, JobDraft
from tickwork.scope import Scope
from tickwork.secrets import vault
from tickwork.store import jobs as jobs_store
from tickwork.tenant import calendars, jobs, quotas
from tickwork.tenant.access import JOBS_WRITE
from tickwork.tenant.definition import FieldChange, definition_changes
from tickwork.tenant.job_edits import new_job
from tickwork.tenant.jobs import JobWithCalendars
from tickwork.tenant.lookup import found

logger = Logger(child=True)

# Lowercase so that a key reads the same in a URL, a file name and a CloudFormation template.
KEY = re.compile(r"^[a-z0-9][a-z0-9._-]{0,127}$")

Action = Literal["create", "update", "unchanged"]


@dataclass(frozen=True)
class JobPlan:
    """`uncompared`: the fields of `changes` holding a sealed value the caller may not compare (they may be the
    same: a PUT would keep them)."""

    key: str
    action: Action
    job_id: str | None
    changes: tuple[FieldChange, ...] = ()
    uncompared: frozenset[str] = frozenset()


# Asked in the transaction that writes the job, its row locked: (conn, the job as it is, None while being
# created; the job's id). Raising refuses the write; what it writes commits with the job.
Claim = Callable[[Any, Job | None, str], None]


def put_job_by_key(scope: Scope, key: str, draft: JobDraft,
                   claim: Claim | None = None) -> tuple[JobWithCalendars, bool]:
    """Create or replace the job with this key; returns it and whether it was created. Two PUTs racing to
    create the same key: one creates, the other then replaces (the unique index decides)."""
    draft = _keyed(key, draft)
    claimed = claim or (lambda conn, job, job_id: None)

    def replace_it(conn: Any, job: Job) -> jobs.Edited:
        claimed(conn, job, job.id)
        return jobs.replaced(scope, conn, job, draft)

    for _ in range(3):
        with scope.db.connection() as conn:
            current = jobs_store.get_job_by_key(conn, scope.tenant_id, key)
        try:
            if current is None:
                return jobs.create_job(scope, draft, lambda conn, job: claimed(conn, None, job.id)), True
            return jobs.transition(scope, current.id, replace_it), False
        except ConflictError as exc:  # created by a concurrent PUT since the read: replace that one
            if exc.field != "key":
                raise
        except NotFoundError:  # deleted since the read: create it again
            pass
    raise ConflictError(f"the job with key {key!r} is changing under concurrent requests; retry", field="key")


def plan_job_by_key(scope: Scope, key: str, draft: JobDraft) -> JobPlan:
    """What `put_job_by_key` would do with this draft, checked as it would be (400s and quota 403s alike);
    nothing is written."""
    draft = _keyed(key, draft)
    compare = JOBS_WRITE in scope.scopes
    with scope.db.connection() as conn:
        current = jobs_store.get_job_by_key(conn, scope.tenant_id, key)
        edited = (jobs.Edited(new_job(scope, draft)) if current is None
                  else jobs.replaced(scope, conn, current, draft, compare_sealed=compare))
        planned = edited.job
        if planned.request is not None and (current is None or planned.request != current.request):
            vault.check_request(scope.keyring, conn, scope.tenant_id, planned.id, planned.request.to_dict(),
                                edited.opened)
        if current is None or planned.calendar != current.calendar:
            calendars.job_calendars(conn, scope.tenant_id, planned.calendar, check=True)
        if current is None or planned != current:
            quotas.enforce(conn, scope.settings, current, planned)
    if current is None:
        return JobPlan(key, "create", None)
    changes = definition_changes(current, planned)
    sealed = _given_for_sealed(current, draft)
    if edited.opened:
        logger.info("plan compared sealed header values", extra={
            "tenant_id": scope.tenant_id, "job_id": current.id, "key_id": scope.key_id, "fields": sorted(sealed)})
    uncompared = frozenset() if compare else sealed
    return JobPlan(key, "update" if changes else "unchanged", current.id, changes, uncompared)


def _given_for_sealed(current: Job, draft: JobDraft) -> frozenset[str]:
    """The header fields whose stored value is sealed and which the draft gives a value for (not REDACTED)."""
    if current.request is None or draft.request is None:
        return frozenset()
    stored, given = current.request.headers, draft.request.headers
    return frozenset(f"request.headers.{name}" for name, value in given.items()
                     if value != REDACTED and vault.is_sealed(stored.get(name, "")))


def get_job_by_key(scope: Scope, key: str) -> JobWithCalendars:
    with scope.db.connection() as conn:
        return jobs.with_calendars(scope, conn, _found(conn, scope, key))


def delete_job_by_key(scope: Scope, key: str, only_if: Callable[[Any, Job], bool] | None = None) -> bool:
    """Whether it was deleted: `only_if` may keep it (tickwork.tenant.jobs.delete_job)."""
    with scope.db.connection() as conn:
        job = _found(conn, scope, key)
    return jobs.delete_job(scope, job.id, only_if)


def _found(conn: Any, scope: Scope, key: str) -> Job:
    if not KEY.match(key):
        raise NotFoundError("job not found")
    return found(jobs_store.get_job_by_key(conn, scope.tenant_id, key), "job")


def _keyed(key: str, draft: JobDraft) -> JobDraft:
    if not KEY.match(key):
        raise InvalidInputError("key", f"must match {KEY.pattern}: lowercase letters, digits, '.', '_' and '-'")
    if draft.key is not None and draft.key != key:
        raise InvalidInputError("key", f"the body's key {draft.key!r} differs from the path's {key!r}")
    return replace(draft, key=key)
