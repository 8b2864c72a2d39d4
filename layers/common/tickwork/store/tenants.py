"""Tenants and their API keys. Keys are random tokens; only their SHA-256 digest is stored."""
from __future__ import annotations

import uuid
from typing import Any

from tickwork.store.keys import authenticate, key_digest, new_api_token


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
        (str(uuid.uuid4()), tenant_id, key_digest(token), token[:8], name),
    )
    return token


def find_tenant(conn: Any, name: str) -> str | None:
    """The tenant of that name, compared without case as the unique index does (migration 0004)."""
    row = conn.execute("SELECT id FROM tenants WHERE lower(name) = lower(%s)", (name,)).fetchone()
    return None if row is None else str(row[0])


def resolve_tenant(conn: Any, id_or_name: str) -> str | None:
    """The tenant whose id (a UUID in any of its spellings) or name (without case) this is, if any."""
    try:
        tenant_id = str(uuid.UUID(id_or_name))
    except ValueError:
        return find_tenant(conn, id_or_name)
    return tenant_id if conn.execute("SELECT 1 FROM tenants WHERE id = %s", (tenant_id,)).fetchone() else None


def tenant_for_key(conn: Any, token: str) -> str | None:
    caller = authenticate(conn, token)
    return None if caller is None else caller.tenant_id


def ensure_bootstrap_key(conn: Any, token: str | None, tenant_name: str = "default") -> tuple[str, str]:
    """The local runtime's first tenant and key: reuse `token` if given (and known), else mint one."""
    if token:
        known = tenant_for_key(conn, token)
        if known:
            return known, token
    tenant_id = find_tenant(conn, tenant_name) or create_tenant(conn, tenant_name)
    return tenant_id, create_api_key(conn, tenant_id, token, name="bootstrap")
