"""A tenant's secrets and signing secrets as its API keys manage them: each change audited, within a `Scope`.
Sealing, opening and what a request may expand to are tickwork.secrets.vault's."""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Sequence

from aws_lambda_powertools import Logger

from tickwork.errors import ConflictError, InvalidInputError, NotFoundError
from tickwork.http import signing
from tickwork.models import Page
from tickwork.scope import Scope
from tickwork.secrets import hosts, interpolation, vault
from tickwork.secrets.crypto import Keyring, require_keyring
from tickwork.store import secrets as store
from tickwork.store.secrets import PgKeyStore, SecretRow
from tickwork.tenant import audit
from tickwork.vocab import AuditAction

logger = Logger(child=True)

MAX_SECRETS = 100
# Receivers get a day to switch to a rotated secret: both sign until then.
ROTATION_OVERLAP = timedelta(hours=24)


# ---------------------------------------------------------------- secrets

def put_secret(
    scope: Scope, name: str, value: str, allowed_hosts: Sequence[str] | None = None, keep_hosts: bool = False,
) -> tuple[SecretRow, bool]:
    """Create or replace a secret; returns it and whether it was created. `allowed_hosts` (None: any host;
    tickwork.secrets.hosts) unless `keep_hosts`: then a replaced secret keeps its own. The limit holds under
    concurrent creates (the tenant's row is locked)."""
    _check_name(name)
    if len(value.encode()) > vault.MAX_VALUE_BYTES:
        raise InvalidInputError("value", f"at most {vault.MAX_VALUE_BYTES} bytes")
    parsed = None if allowed_hosts is None or keep_hosts else hosts.parse_allowed_hosts(allowed_hosts)
    with scope.db.connection() as conn:
        sealed = vault.seal_secret(_keyring(scope), PgKeyStore(conn), scope.tenant_id, name, value)
        with conn.transaction():
            return _put_sealed(conn, scope, name, sealed, parsed, keep_hosts)


def _put_sealed(
    conn: Any, scope: Scope, name: str, sealed: str, allowed_hosts: list[str] | None, keep_hosts: bool,
) -> tuple[SecretRow, bool]:
    store.lock_tenant(conn, scope.tenant_id)
    adding = not store.secret_exists(conn, scope.tenant_id, name)
    if adding and store.count_secrets(conn, scope.tenant_id) >= MAX_SECRETS:
        raise ConflictError(f"a tenant has at most {MAX_SECRETS} secrets", field="name")
    put = store.put_secret(conn, scope.tenant_id, name, sealed, scope.now, allowed_hosts, keep_hosts)
    audit.record(conn, scope, AuditAction.SECRET_PUT, target=name)  # its name only: never its value
    return put


def list_secrets(scope: Scope, limit: int, before: tuple[datetime, str] | None) -> Page[SecretRow]:
    with scope.db.connection() as conn:
        rows = store.list_secrets(conn, scope.tenant_id, limit + 1, before)
    return Page.of(rows, limit, lambda row: (row.created_at, row.id))


def delete_secret(scope: Scope, name: str) -> None:
    with scope.db.connection() as conn, conn.transaction():
        if not (interpolation.NAME.match(name) and store.delete_secret(conn, scope.tenant_id, name)):
            raise NotFoundError("secret not found")
        audit.record(conn, scope, AuditAction.SECRET_DELETED, target=name)


# ---------------------------------------------------------------- signing secrets

def signing_secret(scope: Scope) -> str:
    """The tenant's current signing secret, created on first use."""
    with scope.db.connection() as conn:
        return vault.current_signing(_keyring(scope), conn, scope.tenant_id, scope.now)


def rotate_signing_secret(scope: Scope) -> str:
    """A new current secret; the previous one keeps signing for ROTATION_OVERLAP (one retired earlier stops)."""
    keyring = _keyring(scope)
    with scope.db.connection() as conn:
        keyring.ensure(PgKeyStore(conn))
        with conn.transaction():
            secret = _rotate(keyring, conn, scope)
    logger.info("signing secret rotated", extra={"tenant_id": scope.tenant_id})
    return secret


def _rotate(keyring: Keyring, conn: Any, scope: Scope) -> str:
    store.lock_tenant(conn, scope.tenant_id)
    store.retire_signing_secrets(conn, scope.tenant_id, scope.now + ROTATION_OVERLAP)
    secret = signing.new_secret()
    vault.add_signing(keyring, conn, scope.tenant_id, secret, scope.now)
    audit.record(conn, scope, AuditAction.SIGNING_SECRET_ROTATED)
    return secret


def _check_name(name: str) -> None:
    if not interpolation.NAME.match(name):
        raise InvalidInputError("name", "must match ^[A-Za-z_][A-Za-z0-9_]{0,63}$")


def _keyring(scope: Scope) -> Keyring:
    return require_keyring(scope.keyring)
