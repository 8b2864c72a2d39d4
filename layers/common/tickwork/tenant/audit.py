"""The audit log: who changed what of a tenant's, when. Every service that changes a tenant's jobs, secrets,
keys, signing secret or calendars calls `record` in the transaction of the change, so an entry exists exactly
when the change does.

A new kind of change gets an action (tickwork.vocab.AuditAction: the API lists and documents the same) and one
call in its service, inside the transaction that writes it, as calendars do:
`audit.record(conn, scope, AuditAction.CALENDAR_PUT, target=name)`.

`changes` are fields before and after, as the API shows them: a sensitive header's value is REDACTED, a
secret's value never appears (secrets are named only), an API key's token never (its id and name only). A long
value is kept as its size and digest, and an entry within a size cap (tickwork.tenant.audit_bounds).
"""
from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any, Sequence

from tickwork.models import Job, Key, Page
from tickwork.scope import Actor, Scope
from tickwork.store import audit as store
from tickwork.store.audit import AuditRow
from tickwork.store.filters import AuditFilter
from tickwork.tenant import audit_bounds
from tickwork.tenant.access import AUDIT_READ
from tickwork.tenant.definition import FieldChange, definition, definition_changes, shown
from tickwork.vocab import AuditAction

_ACTIONS = frozenset(AuditAction)
# What a job's state is besides its definition: a change of these is recorded with the definition's.
_STATE_FIELDS = ("status", "key")
_NOBODY = Actor()


def record(conn: Any, scope: Scope, action: AuditAction, *, job_id: str | None = None, target: str | None = None,
           changes: Sequence[FieldChange] | None = None) -> None:
    """One entry for a change `scope`'s actor makes, on `conn` inside the change's transaction."""
    if action not in _ACTIONS:
        raise ValueError(f"unknown audit action {action!r}")
    actor = scope.actor or _NOBODY
    kept = None if changes is None else audit_bounds.bound(
        [{"field": c.field, "before": c.old, "after": c.new} for c in changes])
    store.insert_event(conn, AuditRow(
        str(uuid.uuid4()), scope.tenant_id, scope.now, action, job_id, target, actor.key_id, actor.key_name,
        actor.request_id, actor.client_ip, None if kept is None else kept.changes,
        kept.omitted if kept is not None and kept.omitted else None))


def job_changes(old: Job, new: Job) -> tuple[FieldChange, ...]:
    """What an update changed of a job: its definition's fields (tickwork.tenant.definition), then its state."""
    state = tuple(FieldChange(name, getattr(old, name), getattr(new, name))
                  for name in _STATE_FIELDS if getattr(old, name) != getattr(new, name))
    return definition_changes(old, new) + state


def created_fields(job: Job) -> tuple[FieldChange, ...]:
    """A new job's definition and state as changes from nothing (fields left empty are left out)."""
    fields = {**definition(job), **{name: getattr(job, name) for name in _STATE_FIELDS}}
    return tuple(FieldChange(name, None, shown(name, value)) for name, value in fields.items()
                 if value not in (None, "", [], {}))


def list_events(scope: Scope, filters: AuditFilter, limit: int, before: Key | None) -> Page[AuditRow]:
    """The tenant's entries, newest first, as `scope` may read them (`reads_in_full`, else `redacted`). A job
    id of another tenant (or of no job) matches none."""
    with scope.db.connection() as conn:
        rows = store.list_events(conn, scope.tenant_id, filters, limit + 1, before)
    page = Page.of(rows, limit, lambda row: (row.at, row.id))
    return page if reads_in_full(scope) else replace(page, items=[redacted(row) for row in page.items])


def reads_in_full(scope: Scope) -> bool:
    """An API key with audit:read reads entries whole, as does what no key asks for (operations, a stack)."""
    return scope.key_id is None or AUDIT_READ in scope.scopes


def redacted(row: AuditRow) -> AuditRow:
    """An entry as a key without audit:read reads it: what was done to what, when, and which fields changed;
    not who (key id and name), from where (client address), nor any value before or after (a deleted job's
    body, a key's name and scopes)."""
    changes = None if row.changes is None else [{"field": c["field"], "before": None, "after": None}
                                                for c in row.changes]
    return replace(row, key_id=None, key_name=None, client_ip=None, changes=changes)
