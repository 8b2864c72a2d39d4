"""Tenants and their API keys. Keys are random tokens; only their SHA-256 digest is stored."""
from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid
from typing import Any

KEY_PREFIX = "tw_"


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def new_api_token() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def create_tenant(conn: Any, name: str) -> str:
    """Raises psycopg.errors.UniqueViolation if a tenant has that name already, in any case."""
    tenant_id = str(uuid.uuid4())
    conn.execute("INSERT INTO tenants (id, name) VALUES (%s, %s)", (tenant_id, name))
    return tenant_id


def create_api_key(conn: Any, tenant_id: str, token: str | None = None, name: str = "") -> str:
    """Store a key for the tenant and return the token (the only time it is seen in clear)."""
    token = token or new_api_token()
    conn.execute(
        "INSERT INTO api_keys (id, tenant_id, key_hash, prefix, name) VALUES (%s, %s, %s, %s, %s)"
        " ON CONFLICT (key_hash) DO NOTHING",
        (str(uuid.uuid4()), tenant_id, _digest(token), token[:8], name),
    )
    return token


def find_tenant(conn: Any, name: str) -> str | None:
    """The tenant of that name, compared without case as the unique index does (migration 0004)."""
    row = conn.execute("SELECT id FROM tenants WHERE lower(name) = lower(%s)", (name,)).fetchone()
    return None if row is None else str(row[0])


def tenant_for_key(conn: Any, token: str) -> str | None:
    digest = _digest(token)
    row = conn.execute(
        "SELECT tenant_id, key_hash FROM api_keys WHERE key_hash = %s AND revoked_at IS NULL", (digest,)
    ).fetchone()
    # Found by digest, then compared in constant time (as store.keys.authenticate does).
    return None if row is None or not hmac.compare_digest(bytes(row[1]), digest) else str(row[0])


def ensure_bootstrap_key(conn: Any, token: str | None, tenant_name: str = "default") -> tuple[str, str]:
    """The local runtime's first tenant and key: reuse `token` if given (and known), else mint one."""
    if token:
        known = tenant_for_key(conn, token)
        if known:
            return known, token
    tenant_id = find_tenant(conn, tenant_name) or create_tenant(conn, tenant_name)
    return tenant_id, create_api_key(conn, tenant_id, token, name="bootstrap")
