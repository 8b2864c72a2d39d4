"""SQL of the per-tenant storage budget (tickwork.ops.storage): the bytes and rows a tenant's audit entries and
stored Idempotency-Key answers take, in storage_usage.

Every write or delete of those rows by this release notes its bytes in storage_changes within the same
statement (`tracked`): a change that rolls back notes nothing, and a tenant's concurrent changes share no
row lock (a counter row updated in each change's transaction would queue them, and could deadlock with the
tenant row a quota check locks). The maintenance pass folds the notes into storage_usage (`fold`) and now
and then counts a tenant afresh from its rows (`reconcile`), which also corrects what a release that knows
nothing of these tables wrote or deleted.

An entry's bytes: its JSON and text columns in UTF-8, plus ROW_BYTES for its fixed columns and header.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Sequence

from tickwork.store.maintenance import Budget, delete_in_batches

AUDIT = "audit"
IDEMPOTENCY = "idempotency"
# A row's uuids, timestamps, integers and tuple header, roughly: counted once per entry.
ROW_BYTES = 100
# An audit row's bytes: as written (stored_bytes), or, for a row written before it was kept, measured alike.
AUDIT_BYTES = ("coalesce(stored_bytes, octet_length(coalesce(changes::text, '')) + octet_length(action)"
               " + coalesce(octet_length(target), 0) + coalesce(octet_length(key_name), 0)"
               f" + coalesce(octet_length(request_id), 0) + coalesce(octet_length(client_ip), 0) + {ROW_BYTES})")
IDEMPOTENCY_BYTES = f"(octet_length(key) + coalesce(octet_length(body), 0) + {ROW_BYTES})"


def tracked(dml: str, kind: str) -> str:
    """`dml` (an INSERT, UPDATE or DELETE ... RETURNING tenant_id, bytes, entries: the change it makes) with
    that change noted in storage_changes by the same statement, which returns how many rows `dml` touched."""
    return (f"WITH touched AS ({dml}),"
            f" noted AS (INSERT INTO storage_changes (tenant_id, kind, bytes, entries)"
            f" SELECT tenant_id, '{kind}', sum(bytes), sum(entries) FROM touched GROUP BY tenant_id)"
            " SELECT count(*) FROM touched")


_FOLD = """
WITH folded AS (
    DELETE FROM storage_changes WHERE ctid IN (SELECT ctid FROM storage_changes LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
    RETURNING tenant_id, kind, bytes, entries),
summed AS (
    INSERT INTO storage_usage (tenant_id, kind, bytes, entries)
    SELECT tenant_id, kind, sum(bytes), sum(entries) FROM folded GROUP BY tenant_id, kind
    ON CONFLICT (tenant_id, kind) DO UPDATE
    SET bytes = storage_usage.bytes + EXCLUDED.bytes, entries = storage_usage.entries + EXCLUDED.entries)
SELECT count(*) FROM folded
"""
# One statement, so one snapshot: the notes it deletes are exactly those of rows its counts see (a row and
# its note commit together); notes of changes committed later stay for the next fold.
_RECONCILE = f"""
WITH noted AS (DELETE FROM storage_changes WHERE tenant_id = %(tenant_id)s),
audit AS (SELECT count(*) AS n, coalesce(sum({AUDIT_BYTES}), 0) AS b FROM audit_events WHERE tenant_id = %(tenant_id)s),
idem AS (SELECT count(*) AS n, coalesce(sum({IDEMPOTENCY_BYTES}), 0) AS b FROM idempotency_keys
          WHERE tenant_id = %(tenant_id)s)
INSERT INTO storage_usage (tenant_id, kind, bytes, entries, reconciled_at)
SELECT %(tenant_id)s::uuid, '{AUDIT}', b, n, %(now)s::timestamptz FROM audit
UNION ALL SELECT %(tenant_id)s::uuid, '{IDEMPOTENCY}', b, n, %(now)s::timestamptz FROM idem
ON CONFLICT (tenant_id, kind) DO UPDATE
SET bytes = EXCLUDED.bytes, entries = EXCLUDED.entries, reconciled_at = EXCLUDED.reconciled_at
"""
_DUE_FOR_RECOUNT = f"""
SELECT t.id::text FROM tenants t
  LEFT JOIN storage_usage u ON u.tenant_id = t.id AND u.kind = '{AUDIT}'
 WHERE u.reconciled_at IS NULL OR u.reconciled_at < %(before)s
 ORDER BY u.reconciled_at NULLS FIRST, t.id LIMIT %(limit)s
"""
_OVER_BUDGET = """
SELECT u.tenant_id::text, sum(u.bytes)::bigint, coalesce(t.max_storage_bytes, %(default)s)
  FROM storage_usage u JOIN tenants t ON t.id = u.tenant_id
 GROUP BY u.tenant_id, t.max_storage_bytes
HAVING sum(u.bytes) > coalesce(t.max_storage_bytes, %(default)s)
 ORDER BY u.tenant_id
"""
_OVER_KEYS = f"""
SELECT tenant_id::text FROM storage_usage WHERE kind = '{IDEMPOTENCY}' AND entries > %(most)s ORDER BY tenant_id
"""
# The tenant's oldest entries of both kinds, oldest first (audit_events_tenant_at and
# idempotency_keys_tenant_created, each walked from its oldest end). A key still in flight is not a candidate.
_OLDEST = f"""
(SELECT '{AUDIT}' AS kind, id::text AS ref, at, {AUDIT_BYTES} AS bytes FROM audit_events
  WHERE tenant_id = %(tenant_id)s ORDER BY at, id LIMIT %(limit)s)
UNION ALL
(SELECT '{IDEMPOTENCY}', key, created_at, {IDEMPOTENCY_BYTES} FROM idempotency_keys
  WHERE tenant_id = %(tenant_id)s AND status_code IS NOT NULL ORDER BY created_at, key LIMIT %(limit)s)
ORDER BY at, kind, ref LIMIT %(limit)s
"""
_DELETE_AUDIT = tracked(f"""
DELETE FROM audit_events WHERE tenant_id = %(tenant_id)s AND id = ANY(%(refs)s::uuid[])
RETURNING tenant_id, -{AUDIT_BYTES} AS bytes, -1 AS entries""", AUDIT)
_DELETE_KEYS = tracked(f"""
DELETE FROM idempotency_keys WHERE tenant_id = %(tenant_id)s AND key = ANY(%(refs)s) AND status_code IS NOT NULL
RETURNING tenant_id, -{IDEMPOTENCY_BYTES} AS bytes, -1 AS entries""", IDEMPOTENCY)
# Where a tenant's newest `keep` keys end (idempotency_keys_tenant_created, newest first); then its answered
# keys from there back, oldest first. A key still in flight stays.
_KEYS_BOUNDARY = """
SELECT created_at FROM idempotency_keys WHERE tenant_id = %(tenant_id)s ORDER BY created_at DESC OFFSET %(keep)s LIMIT 1
"""
_CAP_KEYS = tracked(f"""
DELETE FROM idempotency_keys WHERE ctid IN (
    SELECT ctid FROM idempotency_keys
     WHERE tenant_id = %(tenant_id)s AND created_at <= %(boundary)s AND status_code IS NOT NULL
     ORDER BY created_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
RETURNING tenant_id, -{IDEMPOTENCY_BYTES} AS bytes, -1 AS entries""", IDEMPOTENCY)


@dataclass(frozen=True)
class Usage:
    tenant_id: str
    bytes: int
    budget: int


@dataclass(frozen=True)
class Entry:
    """One of a tenant's stored entries: an audit entry (by id) or an Idempotency-Key (by key)."""

    kind: str
    ref: str
    at: datetime
    bytes: int


def json_bytes(value: Any) -> int:
    """A value's size as compact JSON in UTF-8: what an audit entry's changes count."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def fold(conn: Any, batch: int) -> int:
    """Add up to `batch` notes into storage_usage; returns how many."""
    return int(conn.execute(_FOLD, {"limit": batch}).fetchone()[0])


def due_for_recount(conn: Any, before: datetime, limit: int) -> list[str]:
    """Tenants never counted, then those counted longest ago (before `before`)."""
    return [row[0] for row in conn.execute(_DUE_FOR_RECOUNT, {"before": before, "limit": limit})]


def reconcile(conn: Any, tenant_id: str, now: datetime) -> None:
    """Count the tenant's usage afresh from its rows."""
    conn.execute(_RECONCILE, {"tenant_id": tenant_id, "now": now})


def usage(conn: Any, tenant_id: str) -> dict[str, tuple[int, int]]:
    """{kind: (bytes, entries)} as folded so far."""
    rows = conn.execute("SELECT kind, bytes, entries FROM storage_usage WHERE tenant_id = %s", (tenant_id,))
    return {kind: (int(b), int(n)) for kind, b, n in rows}


def over_budget(conn: Any, default_budget: int) -> list[Usage]:
    """Tenants whose usage is past their budget (max_storage_bytes, else `default_budget`)."""
    return [Usage(*row) for row in conn.execute(_OVER_BUDGET, {"default": default_budget})]


def over_key_count(conn: Any, most: int) -> list[str]:
    """Tenants holding more than `most` Idempotency-Keys."""
    return [row[0] for row in conn.execute(_OVER_KEYS, {"most": most})]


def oldest(conn: Any, tenant_id: str, limit: int) -> list[Entry]:
    return [Entry(*row) for row in conn.execute(_OLDEST, {"tenant_id": tenant_id, "limit": limit})]


def delete(conn: Any, tenant_id: str, entries: Sequence[Entry]) -> int:
    """Delete these entries of the tenant (a key still in flight stays), noting what they took; returns how many."""
    deleted = 0
    for kind, sql in ((AUDIT, _DELETE_AUDIT), (IDEMPOTENCY, _DELETE_KEYS)):
        refs = [entry.ref for entry in entries if entry.kind == kind]
        if refs:
            deleted += int(conn.execute(sql, {"tenant_id": tenant_id, "refs": refs}).fetchone()[0])
    return deleted



def cap_keys(conn: Any, tenant_id: str, keep: int, batch: int, budget: Budget) -> int:
    """Delete the tenant's answered keys older than its newest `keep`, oldest first, `batch` per statement until
    done or the budget is spent; returns how many."""
    boundary = conn.execute(_KEYS_BOUNDARY, {"tenant_id": tenant_id, "keep": keep}).fetchone()
    if boundary is None:
        return 0
    return delete_in_batches(conn, _CAP_KEYS, {"tenant_id": tenant_id, "boundary": boundary[0]}, batch, budget)
