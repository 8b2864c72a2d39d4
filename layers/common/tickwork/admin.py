"""Operator actions by direct Lambda invoke of the API function: `lambda:InvokeFunction` on it is the
permission, so no HTTP route leads here (an API Gateway event always carries a requestContext).

{"admin": "create-tenant", "name": "acme"} creates a tenant and its first API key, and returns the key:
the only time it is seen in clear (only its digest is stored).
"""
from __future__ import annotations

from typing import Any, Mapping

from aws_lambda_powertools import Logger

from tickwork.errors import ConflictError, InvalidInputError, TickworkError
from tickwork.store import tenants

logger = Logger(child=True)

MAX_TENANT_NAME = 200


def is_admin_event(event: Mapping[str, Any]) -> bool:
    return "admin" in event and "requestContext" not in event


def handle_admin(pool: Any, event: Mapping[str, Any]) -> dict[str, Any]:
    """The action's result, or {"statusCode", "error": {"code", "message", "field"}} as the API's errors."""
    try:
        if event["admin"] != "create-tenant":
            raise InvalidInputError("admin", "unknown admin action; the one there is: create-tenant")
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
