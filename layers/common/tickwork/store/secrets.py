"""SQL over secrets, signing secrets and wrapped data keys. Values arrive and leave sealed (tickwork.secrets.crypto)."""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Sequence

from psycopg.pq import TransactionStatus
from psycopg.rows import class_row

from tickwork.rules.origins import bare_hosts, in_force

# allowed_hosts: the bare hosts an older release reads; allowed_origins: the entries in force (in_force).
_SECRET_COLUMNS = "id::text, name, created_at, updated_at, allowed_hosts, allowed_origins"


@dataclass(frozen=True)
class SecretRow:
    id: str
    name: str
    created_at: datetime
    updated_at: datetime
    allowed_hosts: list[str] | None  # None: any host; else entries (tickwork.rules.origins)


@dataclass(frozen=True)
class SealedSecret:
    sealed: str
    allowed_hosts: list[str] | None


def _secret_row(row: Any) -> SecretRow:
    secret_id, name, created_at, updated_at, hosts, origins = row[:6]  # a RETURNING adds a column after them
    return SecretRow(secret_id, name, created_at, updated_at, in_force(hosts, origins))


@dataclass(frozen=True)
class SigningRow:
    id: str
    sealed: str
    created_at: datetime
    expires_at: datetime | None


class PgKeyStore:
    """crypto.KeyStore over the encryption_keys table, on one connection."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def current(self) -> tuple[int, bytes] | None:
        row = self.conn.execute("SELECT version, wrapped FROM encryption_keys ORDER BY version DESC LIMIT 1").fetchone()
        return None if row is None else (row[0], bytes(row[1]))

    def wrapped(self, version: int) -> bytes | None:
        row = self.conn.execute("SELECT wrapped FROM encryption_keys WHERE version = %s", (version,)).fetchone()
        return None if row is None else bytes(row[0])

    def add(self, wrapped: bytes, wrapper: str) -> int:
        # A key whose row a rollback could take away might already have sealed values kept elsewhere.
        if self.conn.info.transaction_status != TransactionStatus.IDLE:
            raise RuntimeError("a data key is stored outside any transaction (Keyring.ensure first)")
        return int(self.conn.execute(
            "INSERT INTO encryption_keys (wrapped, wrapper) VALUES (%s, %s) RETURNING version", (wrapped, wrapper),
        ).fetchone()[0])


class PoolKeyStore(PgKeyStore):
    """The same, taking a connection from `pool` for each read (a key is read once per environment)."""

    def __init__(self, pool: Any) -> None:
        self.pool = pool

    def current(self) -> tuple[int, bytes] | None:
        with self.pool.connection() as conn:
            return PgKeyStore(conn).current()

    def wrapped(self, version: int) -> bytes | None:
        with self.pool.connection() as conn:
            return PgKeyStore(conn).wrapped(version)

    def add(self, wrapped: bytes, wrapper: str) -> int:
        with self.pool.connection() as conn:
            return PgKeyStore(conn).add(wrapped, wrapper)


def lock_tenant(conn: Any, tenant_id: str) -> None:
    """Serialise changes to one tenant's secrets (the count limit, rotation) until the transaction ends."""
    conn.execute("SELECT 1 FROM tenants WHERE id = %s FOR UPDATE", (tenant_id,))


def count_secrets(conn: Any, tenant_id: str) -> int:
    return int(conn.execute("SELECT count(*) FROM secrets WHERE tenant_id = %s", (tenant_id,)).fetchone()[0])


def secret_exists(conn: Any, tenant_id: str, name: str) -> bool:
    row = conn.execute("SELECT 1 FROM secrets WHERE tenant_id = %s AND name = %s", (tenant_id, name)).fetchone()
    return row is not None


def put_secret(
    conn: Any, tenant_id: str, name: str, sealed: str, now: datetime, allowed_hosts: list[str] | None,
    keep_hosts: bool,
) -> tuple[SecretRow, bool]:
    """Create or replace; the row and whether it was created. `keep_hosts`: a replaced secret keeps its
    allowed hosts (a new one gets `allowed_hosts`, parsed entries)."""
    row = conn.execute(
        "INSERT INTO secrets (id, tenant_id, name, sealed, created_at, updated_at, allowed_hosts, allowed_origins)"
        " VALUES (%(id)s, %(tenant_id)s, %(name)s, %(sealed)s, %(now)s, %(now)s, %(hosts)s, %(origins)s)"
        " ON CONFLICT (tenant_id, name) DO UPDATE SET sealed = EXCLUDED.sealed, updated_at = EXCLUDED.updated_at,"
        " allowed_hosts = CASE WHEN %(keep)s THEN secrets.allowed_hosts ELSE EXCLUDED.allowed_hosts END,"
        " allowed_origins = CASE WHEN %(keep)s THEN secrets.allowed_origins ELSE EXCLUDED.allowed_origins END"
        f" RETURNING {_SECRET_COLUMNS}, xmax = 0",
        {"id": str(uuid.uuid4()), "tenant_id": tenant_id, "name": name, "sealed": sealed, "now": now,
         "hosts": None if allowed_hosts is None else bare_hosts(allowed_hosts), "origins": allowed_hosts,
         "keep": keep_hosts},
    ).fetchone()
    return _secret_row(row), bool(row[6])


def delete_secret(conn: Any, tenant_id: str, name: str) -> bool:
    return conn.execute("DELETE FROM secrets WHERE tenant_id = %s AND name = %s", (tenant_id, name)).rowcount == 1


def list_secrets(conn: Any, tenant_id: str, limit: int, before: tuple[datetime, str] | None) -> list[SecretRow]:
    """Newest first, keyset on (created_at, id) as the other lists."""
    where = "tenant_id = %(tenant_id)s" + (" AND (created_at, id) < (%(created_at)s, %(id)s::uuid)" if before else "")
    params: dict[str, Any] = {"tenant_id": tenant_id, "limit": limit}
    if before:
        params.update(created_at=before[0], id=before[1])
    rows = conn.execute(
        f"SELECT {_SECRET_COLUMNS} FROM secrets WHERE {where} ORDER BY created_at DESC, id DESC LIMIT %(limit)s",
        params,
    ).fetchall()
    return [_secret_row(row) for row in rows]


def sealed_secrets(conn: Any, tenant_id: str) -> dict[str, SealedSecret]:
    """Every secret of the tenant, sealed, with its allowed hosts, by name."""
    rows = conn.execute("SELECT name, sealed, allowed_hosts, allowed_origins FROM secrets WHERE tenant_id = %s",
                        (tenant_id,))
    return {name: SealedSecret(sealed, in_force(hosts, origins)) for name, sealed, hosts, origins in rows.fetchall()}


def secret_hosts(conn: Any, tenant_id: str) -> dict[str, list[str] | None]:
    """The allowed hosts of each of the tenant's secrets, by name (None: any host)."""
    rows = conn.execute("SELECT name, allowed_hosts, allowed_origins FROM secrets WHERE tenant_id = %s", (tenant_id,))
    return {name: in_force(hosts, origins) for name, hosts, origins in rows.fetchall()}


# ---------------------------------------------------------------- signing secrets

def signing_secrets(conn: Any, tenant_id: str, now: datetime) -> list[SigningRow]:
    """The secrets that sign now, the current one first."""
    with conn.cursor(row_factory=class_row(SigningRow)) as cur:
        return cur.execute(
            "SELECT id::text, sealed, created_at, expires_at FROM signing_secrets"
            " WHERE tenant_id = %s AND (expires_at IS NULL OR expires_at > %s)"
            " ORDER BY expires_at IS NOT NULL, created_at DESC", (tenant_id, now),
        ).fetchall()


def signing_secrets_of(conn: Any, tenant_ids: Sequence[str], now: datetime) -> dict[str, list[SigningRow]]:
    """signing_secrets for several tenants in one statement; a tenant without any is left out."""
    rows = conn.execute(
        "SELECT tenant_id::text, id::text, sealed, created_at, expires_at FROM signing_secrets"
        " WHERE tenant_id = ANY(%s::uuid[]) AND (expires_at IS NULL OR expires_at > %s)"
        " ORDER BY tenant_id, expires_at IS NOT NULL, created_at DESC", (list(tenant_ids), now),
    ).fetchall()
    found: dict[str, list[SigningRow]] = {}
    for tenant_id, *row in rows:
        found.setdefault(tenant_id, []).append(SigningRow(*row))
    return found


def add_signing_secret(conn: Any, tenant_id: str, secret_id: str, sealed: str, now: datetime) -> bool:
    """Insert a current secret; False if the tenant has one already (a concurrent first use)."""
    return conn.execute(
        "INSERT INTO signing_secrets (id, tenant_id, sealed, created_at) VALUES (%s, %s, %s, %s)"
        " ON CONFLICT (tenant_id) WHERE expires_at IS NULL DO NOTHING", (secret_id, tenant_id, sealed, now),
    ).rowcount == 1


def retire_signing_secrets(conn: Any, tenant_id: str, until: datetime) -> None:
    """The current secret signs until `until`; one retired by an earlier rotation stops now (at most two sign)."""
    conn.execute("DELETE FROM signing_secrets WHERE tenant_id = %s AND expires_at IS NOT NULL", (tenant_id,))
    conn.execute("UPDATE signing_secrets SET expires_at = %s WHERE tenant_id = %s AND expires_at IS NULL",
                 (until, tenant_id))


# ---------------------------------------------------------------- re-encryption

# The first key of a keyset scan: every uuid is greater.
FIRST_ID = "00000000-0000-0000-0000-000000000000"
_KEY_COLUMN = {"secrets": "name", "signing_secrets": "id::text"}
# A job holding a sealed header value of another key version (vault.SEALED_MARK, then `v<version>:`).
_STALE_HEADER = ("EXISTS (SELECT 1 FROM jsonb_each_text(coalesce(request->'headers', '{}'::jsonb)) h"
                 " WHERE starts_with(h.value, %(mark)s) AND NOT starts_with(h.value, %(header)s))")


@dataclass(frozen=True)
class StaleSealed:
    """A secret or signing secret sealed under another key than the current one; `key` names it in its context."""

    id: str
    tenant_id: str
    key: str
    sealed: str


@dataclass(frozen=True)
class StaleRequest:
    id: str
    tenant_id: str
    request: dict[str, Any]


def stale_sealed(conn: Any, table: str, version: int, after: str, limit: int) -> list[StaleSealed]:
    """The next `limit` rows of `table` (secrets or signing_secrets) after id `after` not sealed with
    `version`; read without a lock (they are written back compare-and-set)."""
    with conn.cursor(row_factory=class_row(StaleSealed)) as cur:
        return cur.execute(
            f"SELECT id::text, tenant_id::text, {_KEY_COLUMN[table]} AS key, sealed FROM {table}"
            " WHERE id > %s AND NOT starts_with(sealed, %s) ORDER BY id LIMIT %s",
            (after, f"v{version}:", limit),
        ).fetchall()


def reseal(conn: Any, table: str, row_id: str, old: Any, new: Any) -> bool:
    """Replace a row's sealed value (a job's request) unless it changed since it was read: then it is read
    again later. The poller's writes to a job touch other columns."""
    column = "request" if table == "jobs" else "sealed"
    return conn.execute(f"UPDATE {table} SET {column} = %s WHERE id = %s AND {column} = %s",
                        (new, row_id, old)).rowcount == 1


def stale_requests(conn: Any, mark: str, version: int, after: str, limit: int) -> list[StaleRequest]:
    """The next jobs after id `after`, deleted ones too (their rows keep their headers), with a header
    value sealed under another key than `version`; read without a lock."""
    with conn.cursor(row_factory=class_row(StaleRequest)) as cur:
        return cur.execute(
            f"SELECT id::text, tenant_id::text, request FROM jobs WHERE id > %(after)s AND {_STALE_HEADER}"
            " ORDER BY id LIMIT %(limit)s",
            {"after": after, "mark": mark, "header": f"{mark}v{version}:", "limit": limit},
        ).fetchall()


def count_stale(conn: Any, mark: str, version: int) -> dict[str, int]:
    """How many rows of each kind still hold a value sealed under another key than `version`."""
    row = conn.execute(
        "SELECT (SELECT count(*) FROM secrets WHERE NOT starts_with(sealed, %(current)s)),"
        " (SELECT count(*) FROM signing_secrets WHERE NOT starts_with(sealed, %(current)s)),"
        f" (SELECT count(*) FROM jobs WHERE {_STALE_HEADER})",
        {"current": f"v{version}:", "mark": mark, "header": f"{mark}v{version}:"},
    ).fetchone()
    return {"secrets": int(row[0]), "signing_secrets": int(row[1]), "jobs": int(row[2])}


def unsettled_key(conn: Any) -> int | None:
    """The newest key's version while values may still be sealed under older ones, else None."""
    row = conn.execute("SELECT version, resealed_at FROM encryption_keys ORDER BY version DESC LIMIT 1").fetchone()
    return None if row is None or row[1] is not None else int(row[0])


def mark_resealed(conn: Any, version: int, settle_seconds: float) -> bool:
    """Note that nothing is sealed under an older key than `version`, once it has been current long enough
    that no environment still seals with an older one (Postgres's clock on both sides)."""
    return conn.execute(
        "UPDATE encryption_keys SET resealed_at = now() WHERE version = %s AND resealed_at IS NULL"
        " AND created_at < now() - make_interval(secs => %s)", (version, settle_seconds),
    ).rowcount == 1
