"""Operator actions by direct Lambda invoke of the API function: `lambda:InvokeFunction` on it is the
permission, so no HTTP route leads here (an API Gateway event always carries a requestContext).

{"admin": "create-tenant", "name": "acme"} creates a tenant and its first API key, and returns the key:
the only time it is seen in clear (only its digest is stored).

{"admin": "set-quotas", "tenant": "<id or name>", "max_jobs": 5000, "max_runs_per_minute": null} overrides
the tenant's quotas (tickwork.quotas): a number sets one, null goes back to the deployment's default, a
quota not named is left as it is. Returns the tenant's quotas in force. Jobs already over a lowered quota
keep running; the next create, update or resume that would exceed it is refused.
{"admin": "rotate-encryption-key"} makes a new data key current and re-encrypts every secret, signing
secret and sensitive job header with it (tickwork.vault.reencrypt_all); older keys stay to open anything
written meanwhile by an environment that had not yet seen the new one (running it again moves those too).
"""
from __future__ import annotations

import uuid
from typing import Any, Mapping

from aws_lambda_powertools import Logger

from tickwork import quotas, vault
from tickwork.crypto import Keyring
from tickwork.errors import ConflictError, InvalidInputError, NotFoundError, TickworkError
from tickwork.settings import Settings
from tickwork.store import quotas as quotas_store
from tickwork.store import tenants
from tickwork.wiring import require_keyring

logger = Logger(child=True)

MAX_TENANT_NAME = 200
# Far above any deployment's needs, low enough that sums of runs a minute stay ordinary integers.
MAX_QUOTA = 10_000_000


def is_admin_event(event: Mapping[str, Any]) -> bool:
    return "admin" in event and "requestContext" not in event


def handle_admin(
    pool: Any, event: Mapping[str, Any], settings: Settings, keyring: Keyring | None = None,
) -> dict[str, Any]:
    """The action's result, or {"statusCode", "error": {"code", "message", "field"}} as the API's errors."""
    try:
        if event["admin"] == "set-quotas":
            return set_quotas(pool, settings, event)
        if event["admin"] == "rotate-encryption-key":
            return vault.reencrypt_all(require_keyring(keyring), pool)
        if event["admin"] != "create-tenant":
            raise InvalidInputError("admin", "unknown admin action; the ones there are: create-tenant, set-quotas, "
                                             "rotate-encryption-key")
        return create_tenant_with_key(pool, _tenant_name(event.get("name")))
    except TickworkError as exc:
        from tickwork.api.errors import tickwork_error  # the API's error shape, without loading the API first

        response = tickwork_error(exc)
        return {"statusCode": response.status_code, **(response.body or {})}


def create_tenant_with_key(pool: Any, name: str) -> dict[str, Any]:
    from psycopg.errors import UniqueViolation

    try:
        with pool.connection() as conn, conn.transaction():
            if tenants.find_tenant(conn, name) is not None:
                raise _name_taken()
            tenant_id = tenants.create_tenant(conn, name)
            token = tenants.create_api_key(conn, tenant_id, name="bootstrap")
    except UniqueViolation as exc:
        # A concurrent call created the name between our check and our insert: the index decided.
        if exc.diag.constraint_name != "tenants_name_unique":
            raise
        raise _name_taken() from None
    logger.info("tenant created", extra={"tenant_id": tenant_id})
    return {"tenant_id": tenant_id, "name": name, "api_key": token,
            "note": "the key is shown only now: keep it (Authorization: Bearer <api_key>)"}


class _NameTakenError(ConflictError):
    field = "name"


def _name_taken() -> _NameTakenError:
    return _NameTakenError("a tenant of that name (compared without case) exists already; its keys cannot be "
                           "shown again")


def _tenant_name(raw: Any) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise InvalidInputError("name", "the tenant's name is required (a non-empty string)")
    if len(raw.strip()) > MAX_TENANT_NAME:
        raise InvalidInputError("name", f"at most {MAX_TENANT_NAME} characters")
    return raw.strip()


def set_quotas(pool: Any, settings: Settings, event: Mapping[str, Any]) -> dict[str, Any]:
    changes = {name: _quota(name, event[name]) for name in quotas.QUOTA_FIELDS if name in event}
    unknown = sorted(set(event) - {"admin", "tenant", *quotas.QUOTA_FIELDS})
    if unknown:
        raise InvalidInputError(unknown[0], "unknown field; quotas are " + ", ".join(quotas.QUOTA_FIELDS))
    with pool.connection() as conn, conn.transaction():
        tenant_id = _tenant_id(conn, event.get("tenant"))
        quotas_store.set_overrides(conn, tenant_id, changes)
        overrides = quotas_store.get_overrides(conn, tenant_id)
    logger.info("tenant quotas set", extra={"tenant_id": tenant_id, **changes})
    in_force = quotas.effective(settings, overrides)
    return {"tenant_id": tenant_id, "quotas": in_force.as_dict(), "overrides": overrides}


def _quota(name: str, raw: Any) -> int | None:
    lowest = 1 if name == "min_interval_seconds" else 0
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int) or not lowest <= raw <= MAX_QUOTA:
        raise InvalidInputError(name, f"must be an integer from {lowest} to {MAX_QUOTA}, or null for the default")
    return raw


def _tenant_id(conn: Any, raw: Any) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise InvalidInputError("tenant", "the tenant's id or name is required")
    try:
        tenant_id: str | None = str(uuid.UUID(raw.strip()))
        if conn.execute("SELECT 1 FROM tenants WHERE id = %s", (tenant_id,)).fetchone() is None:
            tenant_id = None
    except ValueError:
        tenant_id = tenants.find_tenant(conn, raw.strip())
    if tenant_id is None:
        raise _NoTenantError("no tenant of that id or name")
    return tenant_id


class _NoTenantError(NotFoundError):
    field = "tenant"
