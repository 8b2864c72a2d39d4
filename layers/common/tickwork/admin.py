"""Operator actions by direct Lambda invoke of the API function: `lambda:InvokeFunction` on it is the
permission, so no HTTP route leads here (an API Gateway event always carries a requestContext).

{"admin": "create-tenant", "name": "acme"} creates a tenant and its first API key, and returns the key:
the only time it is seen in clear (only its digest is stored).

{"admin": "rotate-encryption-key"} makes a new data key current and re-encrypts every secret, signing
secret and sensitive job header with it (tickwork.vault.reencrypt_all); older keys stay to open anything
written meanwhile by an environment that had not yet seen the new one (running it again moves those too).
"""
from __future__ import annotations

from typing import Any, Mapping

from aws_lambda_powertools import Logger

from tickwork import vault
from tickwork.api.errors import tickwork_error
from tickwork.crypto import Keyring
from tickwork.errors import ConflictError, InvalidInputError, TickworkError
from tickwork.store import tenants
from tickwork.wiring import require_keyring

logger = Logger(child=True)

MAX_TENANT_NAME = 200


def is_admin_event(event: Mapping[str, Any]) -> bool:
    return "admin" in event and "requestContext" not in event


def handle_admin(pool: Any, event: Mapping[str, Any], keyring: Keyring | None = None) -> dict[str, Any]:
    """The action's result, or {"statusCode", "error": {"code", "message", "field"}} as the API's errors."""
    try:
        if event["admin"] == "rotate-encryption-key":
            return vault.reencrypt_all(require_keyring(keyring), pool)
        if event["admin"] != "create-tenant":
            raise InvalidInputError("admin", "unknown admin action; those there are: create-tenant, "
                                             "rotate-encryption-key")
        return create_tenant_with_key(pool, _tenant_name(event.get("name")))
    except TickworkError as exc:
        response = tickwork_error(exc)
        return {"statusCode": response.status_code, **(response.body or {})}


def create_tenant_with_key(pool: Any, name: str) -> dict[str, Any]:
    with pool.connection() as conn, conn.transaction():
        if tenants.find_tenant(conn, name) is not None:
            raise _NameTakenError("a tenant of that name exists already; its keys cannot be shown again")
        tenant_id = tenants.create_tenant(conn, name)
        token = tenants.create_api_key(conn, tenant_id, name="bootstrap")
    logger.info("tenant created", extra={"tenant_id": tenant_id})
    return {"tenant_id": tenant_id, "name": name, "api_key": token,
            "note": "the key is shown only now: keep it (Authorization: Bearer <api_key>)"}


class _NameTakenError(ConflictError):
    field = "name"


def _tenant_name(raw: Any) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise InvalidInputError("name", "the tenant's name is required (a non-empty string)")
    if len(raw.strip()) > MAX_TENANT_NAME:
        raise InvalidInputError("name", f"at most {MAX_TENANT_NAME} characters")
    return raw.strip()
