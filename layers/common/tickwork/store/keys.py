"""SQL over api_keys for the tenant's own key management and for authentication.

A key is looked up by the SHA-256 digest of the token (key_digest): the lookup's timing depends on
the digest only, which tells a caller nothing about any stored key, and the clear token is never stored.
The digest found is then compared with hmac.compare_digest (constant time).
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Sequence

from psycopg.rows import class_row

KEY_PREFIX = "tw_"
# last_used_at is a hint for the key's owner ("is this key still used?"), not an audit log: one write a
# minute per key at most, instead of one per request.
LAST_USED_RESOLUTION = timedelta(minutes=1)
_COLUMNS = "id::text, name, prefix, scopes, created_at, last_used_at"


def key_digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def new_api_token() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


@dataclass(frozen=True)
class KeyRow:
    id: str
    name: str
    prefix: str
    scopes: list[str]
    created_at: datetime
    last_used_at: datetime | None


@dataclass(frozen=True)
class Caller:
    key_id: str
    tenant_id: str
    last_used_at: datetime | None
    scopes: frozenset[str]
    name: str = ""


def authenticate(conn: Any, token: str) -> Caller | None:
    digest = key_digest(token)
    row = conn.execute(
        "SELECT id::text, tenant_id::text, last_used_at, key_hash, scopes, name FROM api_keys"
        " WHERE key_hash = %s AND revoked_at IS NULL",
        (digest,),
    ).fetchone()
    # The index found the row by digest; the digests are compared once more in constant time, so no
    # comparison of key material anywhere depends on where two values first differ.
    if row is None or not hmac.compare_digest(bytes(row[3]), digest):
        return None
    return Caller(row[0], row[1], row[2], frozenset(row[4]), row[5])


def note_use(conn: Any, caller: Caller, now: datetime) -> None:
    """Record that the key was used at `now`, unless that was recorded less than a minute ago."""
    if caller.last_used_at is not None and now - caller.last_used_at < LAST_USED_RESOLUTION:
        return
    conn.execute(
        "UPDATE api_keys SET last_used_at = %(now)s WHERE id = %(id)s"
        " AND (last_used_at IS NULL OR last_used_at <= %(since)s)",
        {"id": caller.key_id, "now": now, "since": now - LAST_USED_RESOLUTION},
    )


def create_key(conn: Any, tenant_id: str, name: str, scopes: Sequence[str], now: datetime) -> tuple[KeyRow, str]:
    """A new key for the tenant, and its token: the only time the token is seen in clear."""
    token = new_api_token()
    with conn.cursor(row_factory=class_row(KeyRow)) as cur:
        row = cur.execute(
            "INSERT INTO api_keys (id, tenant_id, key_hash, prefix, name, scopes, created_at)"
            f" VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING {_COLUMNS}",
            (str(uuid.uuid4()), tenant_id, key_digest(token), token[:8], name, list(scopes), now),
        ).fetchone()
    assert row is not None
    return row, token


def list_keys(conn: Any, tenant_id: str, limit: int) -> list[KeyRow]:
    """The tenant's live keys, oldest first."""
    with conn.cursor(row_factory=class_row(KeyRow)) as cur:
        return cur.execute(
            f"SELECT {_COLUMNS} FROM api_keys WHERE tenant_id = %s AND revoked_at IS NULL"
            " ORDER BY created_at, id LIMIT %s",
            (tenant_id, limit),
        ).fetchall()


def get_key(conn: Any, tenant_id: str, key_id: str) -> KeyRow | None:
    """One live key of the tenant."""
    with conn.cursor(row_factory=class_row(KeyRow)) as cur:
        return cur.execute(
            f"SELECT {_COLUMNS} FROM api_keys WHERE id = %s AND tenant_id = %s AND revoked_at IS NULL",
            (key_id, tenant_id),
        ).fetchone()


def lock_live_keys(conn: Any, tenant_id: str) -> list[str]:
    """The ids of the tenant's live keys, with the tenant's row locked until the transaction ends: deletes
    and creates of one tenant's keys take turns, so two deletes cannot both see "another key is left"."""
    conn.execute("SELECT 1 FROM tenants WHERE id = %s FOR UPDATE", (tenant_id,))
    return [str(row[0]) for row in conn.execute(
        "SELECT id FROM api_keys WHERE tenant_id = %s AND revoked_at IS NULL", (tenant_id,))]


def revoke_key(conn: Any, tenant_id: str, key_id: str, now: datetime) -> bool:
    return conn.execute(
        "UPDATE api_keys SET revoked_at = %s WHERE id = %s AND tenant_id = %s AND revoked_at IS NULL",
        (now, key_id, tenant_id),
    ).rowcount == 1
