"""SQL over idempotency_keys: one row per (tenant, key), claimed before the request runs, then holding its
response. A row past the retention, or still in flight past its lease, may be claimed afresh."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tickwork.store.maintenance import Budget, delete_in_batches
from tickwork.store.storage import IDEMPOTENCY, IDEMPOTENCY_BYTES, tracked

# A key past the retention, or in flight past its lease, is deleted before it is claimed afresh: its bytes
# leave the tenant's storage with it. Each write below is counted there (tickwork.store.storage).
_FORGET_STALE = tracked(f"""
DELETE FROM idempotency_keys WHERE tenant_id = %(tenant)s AND key = %(key)s
   AND (created_at < %(expired)s OR (status_code IS NULL AND created_at < %(abandoned)s))
RETURNING tenant_id, -{IDEMPOTENCY_BYTES} AS bytes, -1 AS entries""", IDEMPOTENCY)
_CLAIM = tracked(f"""
INSERT INTO idempotency_keys (tenant_id, key, fingerprint, created_at) VALUES (%(tenant)s, %(key)s, %(fp)s, %(now)s)
ON CONFLICT (tenant_id, key) DO NOTHING
RETURNING tenant_id, {IDEMPOTENCY_BYTES} AS bytes, 1 AS entries""", IDEMPOTENCY)
_FINISH = tracked("""
UPDATE idempotency_keys SET status_code = %(status)s, body = %(body)s, answer_bytes = %(answer_bytes)s
 WHERE tenant_id = %(tenant)s AND key = %(key)s AND created_at = %(claimed_at)s AND status_code IS NULL
RETURNING tenant_id, octet_length(body) AS bytes, 0 AS entries""", IDEMPOTENCY)
_RELEASE = tracked(f"""
DELETE FROM idempotency_keys
 WHERE tenant_id = %(tenant)s AND key = %(key)s AND created_at = %(claimed_at)s AND status_code IS NULL
RETURNING tenant_id, -{IDEMPOTENCY_BYTES} AS bytes, -1 AS entries""", IDEMPOTENCY)
# Oldest first along idempotency_keys_created.
_PRUNE = tracked(f"""
DELETE FROM idempotency_keys WHERE ctid IN (
    SELECT ctid FROM idempotency_keys WHERE created_at < %(cutoff)s
     ORDER BY created_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
RETURNING tenant_id, -{IDEMPOTENCY_BYTES} AS bytes, -1 AS entries""", IDEMPOTENCY)


@dataclass(frozen=True)
class KeyState:
    fingerprint: bytes
    status_code: int | None  # None: still in flight
    body: str | None
    answer_bytes: int | None = None  # the answer was this large, too large to keep: `body` holds its id only


def claim(conn: Any, tenant_id: str, key: str, fingerprint: bytes, now: datetime,
          expired_before: datetime, abandoned_before: datetime) -> bool:
    """True if this request now owns the key (new, expired, or abandoned in flight)."""
    params = {"tenant": tenant_id, "key": key, "fp": fingerprint, "now": now, "expired": expired_before,
              "abandoned": abandoned_before}
    conn.execute(_FORGET_STALE, params)
    return int(conn.execute(_CLAIM, params).fetchone()[0]) == 1


def get(conn: Any, tenant_id: str, key: str) -> KeyState | None:
    row = conn.execute(
        "SELECT fingerprint, status_code, body, answer_bytes FROM idempotency_keys WHERE tenant_id = %s AND key = %s",
        (tenant_id, key),
    ).fetchone()
    return None if row is None else KeyState(bytes(row[0]), row[1], row[2], row[3])


def finish(conn: Any, tenant_id: str, key: str, claimed_at: datetime, status_code: int, body: str,
           answer_bytes: int | None = None) -> None:
    conn.execute(_FINISH, {"tenant": tenant_id, "key": key, "claimed_at": claimed_at, "status": status_code,
                           "body": body, "answer_bytes": answer_bytes})


def release(conn: Any, tenant_id: str, key: str, claimed_at: datetime) -> None:
    """Forget this request's claim (it failed): the key may be used again."""
    conn.execute(_RELEASE, {"tenant": tenant_id, "key": key, "claimed_at": claimed_at})


def prune(conn: Any, before: datetime, batch: int, budget: Budget) -> int:
    """Delete keys created before `before`, `batch` rows per statement, until the budget is spent; returns how many."""
    return delete_in_batches(conn, _PRUNE, {"cutoff": before}, batch, budget)
