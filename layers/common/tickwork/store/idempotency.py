"""SQL over idempotency_keys: one row per (tenant, key), claimed before the request runs, then holding its
response. A row past the retention, or still in flight past its lease, may be claimed afresh."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tickwork.store.maintenance import Budget, delete_in_batches


@dataclass(frozen=True)
class KeyState:
    fingerprint: bytes
    status_code: int | None  # None: still in flight
    body: str | None


def claim(conn: Any, tenant_id: str, key: str, fingerprint: bytes, now: datetime,
          expired_before: datetime, abandoned_before: datetime) -> bool:
    """True if this request now owns the key (new, expired, or abandoned in flight)."""
    return conn.execute(
        "INSERT INTO idempotency_keys (tenant_id, key, fingerprint, created_at)"
        " VALUES (%(tenant)s, %(key)s, %(fp)s, %(now)s)"
        " ON CONFLICT (tenant_id, key) DO UPDATE"
        " SET fingerprint = EXCLUDED.fingerprint, created_at = EXCLUDED.created_at, status_code = NULL, body = NULL"
        " WHERE idempotency_keys.created_at < %(expired)s"
        " OR (idempotency_keys.status_code IS NULL AND idempotency_keys.created_at < %(abandoned)s)"
        " RETURNING 1",
        {"tenant": tenant_id, "key": key, "fp": fingerprint, "now": now, "expired": expired_before,
         "abandoned": abandoned_before},
    ).fetchone() is not None


def get(conn: Any, tenant_id: str, key: str) -> KeyState | None:
    row = conn.execute(
        "SELECT fingerprint, status_code, body FROM idempotency_keys WHERE tenant_id = %s AND key = %s",
        (tenant_id, key),
    ).fetchone()
    return None if row is None else KeyState(bytes(row[0]), row[1], row[2])


def finish(conn: Any, tenant_id: str, key: str, claimed_at: datetime, status_code: int, body: str) -> None:
    conn.execute(
        "UPDATE idempotency_keys SET status_code = %s, body = %s"
        " WHERE tenant_id = %s AND key = %s AND created_at = %s AND status_code IS NULL",
        (status_code, body, tenant_id, key, claimed_at),
    )


def release(conn: Any, tenant_id: str, key: str, claimed_at: datetime) -> None:
    """Forget this request's claim (it failed): the key may be used again."""
    conn.execute(
        "DELETE FROM idempotency_keys WHERE tenant_id = %s AND key = %s AND created_at = %s AND status_code IS NULL",
        (tenant_id, key, claimed_at),
    )


# Oldest first along idempotency_keys_created.
_PRUNE = """
DELETE FROM idempotency_keys WHERE ctid IN (
    SELECT ctid FROM idempotency_keys WHERE created_at < %(cutoff)s
     ORDER BY created_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
"""


def prune(conn: Any, before: datetime, batch: int, budget: Budget) -> int:
    """Delete keys created before `before`, `batch` rows per statement, until the budget is spent; returns how many."""
    return delete_in_batches(conn, _PRUNE, {"cutoff": before}, batch, budget)
