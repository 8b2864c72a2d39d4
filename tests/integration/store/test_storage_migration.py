"""Migration 0021 (storage bounds, audit:read) on a database that already holds keys, audit entries and
Idempotency-Keys, as a deploy meets it; and what the release before it still writes afterwards."""
from __future__ import annotations

import uuid
from typing import Any, Iterator

import psycopg
import pytest

from tests.integration.store.schemas import migrated_before
from tickwork.store import migrate as migrations
from tickwork.store.tenants import create_api_key

STORAGE = "0021_storage_budget.sql"
OLD_FULL = ["jobs:read", "jobs:write", "runs:write", "secrets:write", "keys:admin"]


@pytest.fixture
def before_0021(servers: Any) -> Iterator[psycopg.Connection]:
    with migrated_before(servers, 21) as conn:
        yield conn


def _key(conn: psycopg.Connection, tenant_id: str, name: str, scopes: list[str] | None) -> None:
    if scopes is None:  # the column's default, as a tenant's first key is made
        create_api_key(conn, tenant_id, name=name)
    else:
        conn.execute("INSERT INTO api_keys (id, tenant_id, key_hash, prefix, name, scopes)"
                     " VALUES (gen_random_uuid(), %s, %s, 'tw_x', %s, %s)",
                     (tenant_id, uuid.uuid4().bytes, name, scopes))


def _scopes(conn: psycopg.Connection) -> dict[str, list[str]]:
    return {name: scopes for name, scopes in conn.execute("SELECT name, scopes FROM api_keys")}


def test_0021_gives_audit_read_to_the_keys_that_administer_keys_and_to_new_full_keys(
    before_0021: psycopg.Connection,
) -> None:
    conn = before_0021
    tenant_id = str(conn.execute("INSERT INTO tenants (id, name) VALUES (gen_random_uuid(), 't') RETURNING id")
                    .fetchone()[0])
    _key(conn, tenant_id, "first", None)
    _key(conn, tenant_id, "reader", ["jobs:read"])
    _key(conn, tenant_id, "admin", ["jobs:read", "keys:admin"])

    assert STORAGE in migrations.migrate(conn)

    assert _scopes(conn) == {"first": [*OLD_FULL, "audit:read"], "reader": ["jobs:read"],
                             "admin": ["jobs:read", "keys:admin", "audit:read"]}
    _key(conn, tenant_id, "bootstrap", None)
    assert _scopes(conn)["bootstrap"] == [*OLD_FULL, "audit:read"]
    assert STORAGE not in migrations.migrate(conn)  # applied once


def test_after_0021_the_release_before_writes_and_reads_as_it_did(before_0021: psycopg.Connection) -> None:
    """Its statements, as it sends them: no new column named, nothing of the budget noted."""
    conn = before_0021
    migrations.migrate(conn)
    tenant_id = conn.execute("INSERT INTO tenants (id, name) VALUES (gen_random_uuid(), 't') RETURNING id").fetchone()[0]
    conn.execute("INSERT INTO audit_events (id, tenant_id, at, action, job_id, target, key_id, key_name, request_id,"
                 " client_ip, changes) VALUES (gen_random_uuid(), %s, now(), 'job.updated', NULL, 'j', NULL, 'k',"
                 " 'r', '203.0.113.1', '[]')", (tenant_id,))
    conn.execute("INSERT INTO idempotency_keys (tenant_id, key, fingerprint, created_at) VALUES (%s, 'k', '\\x00',"
                 " now()) ON CONFLICT (tenant_id, key) DO UPDATE SET status_code = NULL, body = NULL", (tenant_id,))
    conn.execute("UPDATE idempotency_keys SET status_code = 201, body = '{}' WHERE tenant_id = %s", (tenant_id,))
    conn.execute("UPDATE tenants SET max_jobs = 5 WHERE id = %s", (tenant_id,))
    assert conn.execute("SELECT count(*) FROM storage_changes").fetchone()[0] == 0
    assert conn.execute("SELECT stored_bytes, changes_omitted FROM audit_events").fetchone() == (None, None)
    assert conn.execute("SELECT answer_bytes, body FROM idempotency_keys").fetchone() == (None, "{}")
