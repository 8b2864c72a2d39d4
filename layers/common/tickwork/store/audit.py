"""SQL over audit_events: one row per change a tenant made (tickwork.tenant.audit), listed newest first and
deleted after the retention; each write and delete counted in the tenant's storage (tickwork.store.storage)."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from tickwork.store.filters import AuditFilter
from tickwork.store.maintenance import Budget, delete_in_batches
from tickwork.store.storage import AUDIT, AUDIT_BYTES, ROW_BYTES, json_bytes, tracked

_COLUMNS = ("id::text, tenant_id::text, at, action, job_id::text, target, key_id::text, key_name, request_id,"
            " client_ip, changes, changes_omitted")
_INSERT = tracked("""
INSERT INTO audit_events (id, tenant_id, at, action, job_id, target, key_id, key_name, request_id, client_ip, changes,
                          changes_omitted, stored_bytes)
VALUES (%(id)s, %(tenant_id)s, %(at)s, %(action)s, %(job_id)s, %(target)s, %(key_id)s, %(key_name)s,
        %(request_id)s, %(client_ip)s, %(changes)s, %(changes_omitted)s, %(stored_bytes)s)
RETURNING tenant_id, stored_bytes AS bytes, 1 AS entries""", AUDIT)
# Oldest first along audit_events_at, a batch per statement; SKIP LOCKED: never wait behind a writer.
_PRUNE = tracked(f"""
DELETE FROM audit_events WHERE id IN (
    SELECT id FROM audit_events WHERE at < %(cutoff)s ORDER BY at LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
RETURNING tenant_id, -{AUDIT_BYTES} AS bytes, -1 AS entries""", AUDIT)


@dataclass(frozen=True)
class AuditRow:
    id: str
    tenant_id: str
    at: datetime
    action: str
    job_id: str | None
    target: str | None
    key_id: str | None
    key_name: str | None
    request_id: str | None
    client_ip: str | None
    changes: Any
    changes_omitted: int | None = None  # changes left out at the entry's size cap


def insert_event(conn: Any, row: AuditRow) -> None:
    params = {**row.__dict__, "changes": None if row.changes is None else Jsonb(row.changes),
              "stored_bytes": stored_bytes(row)}
    conn.execute(_INSERT, params)


def stored_bytes(row: AuditRow) -> int:
    """What the entry counts in its tenant's storage (tickwork.store.storage.AUDIT_BYTES measures it alike)."""
    texts = (row.action, row.target, row.key_name, row.request_id, row.client_ip)
    changes = 0 if row.changes is None else json_bytes(row.changes)
    return changes + sum(len(text.encode()) for text in texts if text) + ROW_BYTES


def list_events(
    conn: Any, tenant_id: str, filters: AuditFilter, limit: int, before: tuple[datetime, str] | None,
) -> list[AuditRow]:
    """The tenant's entries, newest first (audit_events_tenant_at, or audit_events_tenant_job for one job),
    narrowed by `filters`; `before` is the (at, id) of the
    last one seen."""
    clauses = {"job_id": " AND job_id = %(job_id)s::uuid", "action": " AND action = %(action)s",
               "since": " AND at >= %(since)s", "until": " AND at < %(until)s"}
    where = "tenant_id = %(tenant_id)s"
    params: dict[str, Any] = {"tenant_id": tenant_id, "limit": limit}
    for name, clause in clauses.items():
        if getattr(filters, name) is not None:
            where += clause
            params[name] = getattr(filters, name)
    if before:
        where += " AND (at, id) < (%(at)s, %(id)s::uuid)"
        params.update(at=before[0], id=before[1])
    with conn.cursor(row_factory=class_row(AuditRow)) as cur:
        return cur.execute(f"SELECT {_COLUMNS} FROM audit_events WHERE {where} ORDER BY at DESC, id DESC"
                           " LIMIT %(limit)s", params).fetchall()


def prune(conn: Any, cutoff: datetime, batch: int, budget: Budget) -> int:
    """Delete entries older than `cutoff`, oldest first, until done or the budget is spent; returns how many."""
    return delete_in_batches(conn, _PRUNE, {"cutoff": cutoff}, batch, budget)
