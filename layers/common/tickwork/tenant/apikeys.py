"""A tenant's own API keys: create (the token is shown once, its scopes within the creating key's), list,
delete (only a key whose every scope the deleting key holds). Deleting a key takes effect on the next request
(every route looks the key up itself); a tenant cannot delete its last key."""
from __future__ import annotations

from datetime import datetime
from typing import Any, Sequence

from tickwork.errors import ConflictError, NotFoundError, QuotaExceededError, UnauthorizedError
from tickwork.scope import Scope
from tickwork.secrets.crypto import Keyring
from tickwork.store import keys as store
from tickwork.store.keys import Caller, KeyRow
from tickwork.store.secrets import PgKeyStore
from tickwork.tenant import access, audit
from tickwork.tenant.definition import FieldChange
from tickwork.tenant.lookup import parse_id
from tickwork.vocab import AuditAction

# Keys are for people and systems (CI, a service, a laptop), not minted per request; the list is one page.
MAX_KEYS = 100


def create_key(scope: Scope, name: str, scopes: Sequence[str] | None = None) -> tuple[KeyRow, str]:
    """`scopes` None: every scope the creating key holds (tickwork.tenant.access.parse_scopes)."""
    granted = access.parse_scopes(scopes, scope.scopes)
    with scope.db.connection() as conn, conn.transaction():
        if len(store.lock_live_keys(conn, scope.tenant_id)) >= MAX_KEYS:
            raise QuotaExceededError("max_api_keys", MAX_KEYS,
                                     f"a tenant may have at most {MAX_KEYS} API keys; delete one first")
        row, token = store.create_key(conn, scope.tenant_id, name, granted, scope.now)
        audit.record(conn, scope, AuditAction.API_KEY_CREATED, target=row.id, changes=(
            FieldChange("name", None, row.name), FieldChange("scopes", None, list(row.scopes))))
        return row, token


def authenticate(conn: Any, token: str, now: datetime, keyring: Keyring | None = None) -> Caller:
    """The live key `token` is, its use noted (at most once a minute), else UnauthorizedError: the one check of
    a key, for every door that takes one (the API's routes, the CloudFormation provider). With `keyring`, its
    first data key is made here too, outside any route's transaction, so that the route can seal."""
    caller = store.authenticate(conn, token)
    if caller is None:
        raise UnauthorizedError("invalid API key")
    store.note_use(conn, caller, now)
    if keyring is not None:
        keyring.ensure(PgKeyStore(conn))
    return caller


def list_keys(scope: Scope) -> list[KeyRow]:
    with scope.db.connection() as conn:
        return store.list_keys(conn, scope.tenant_id, MAX_KEYS)


def current_key(scope: Scope) -> KeyRow:
    """The key the request was made with."""
    with scope.db.connection() as conn:
        row = store.get_key(conn, scope.tenant_id, scope.key_id) if scope.key_id else None
    if row is None:  # deleted between authentication and here
        raise NotFoundError("API key not found")
    return row


def delete_key(scope: Scope, key_id: str) -> None:
    """Revoke a key of the caller's tenant (another tenant's key is not found); never the last one, nor one
    holding a scope the caller's key lacks (403)."""
    key_id = parse_id(key_id, "API key")
    with scope.db.connection() as conn, conn.transaction():
        live = store.lock_live_keys(conn, scope.tenant_id)
        if key_id not in live:
            raise NotFoundError("API key not found")
        if len(live) == 1:
            raise ConflictError("this is the tenant's last API key: create another one before deleting it")
        target = store.get_key(conn, scope.tenant_id, key_id)
        assert target is not None  # live, and the tenant's row is locked
        access.check_covers(scope.scopes, target.scopes, f"that API key {key_id} holds, so it cannot delete it")
        store.revoke_key(conn, scope.tenant_id, key_id, scope.now)
        audit.record(conn, scope, AuditAction.API_KEY_DELETED, target=key_id)


