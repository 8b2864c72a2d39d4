"""The API function's other door: operator actions by direct Lambda invoke (tickwork.ops.admin has them),
answered with the API's error shape."""
from __future__ import annotations

from typing import Any, Callable, Mapping

from tickwork import wiring
from tickwork.api.errors import tickwork_error
from tickwork.errors import InvalidInputError, TickworkError
from tickwork.ops import admin
from tickwork.secrets import vault
from tickwork.secrets.crypto import Keyring, require_keyring
from tickwork.settings import Settings
from tickwork.wiring import Services


def is_admin_event(event: Mapping[str, Any]) -> bool:
    return "admin" in event and "requestContext" not in event


def handle_admin(
    pool: Any, event: Mapping[str, Any], settings: Settings, keyring: Keyring | None = None,
    services: Callable[[], Services] = wiring.services,
) -> dict[str, Any]:
    """The action's result, or {"statusCode", "error": {"code", "message", "field"}} as the API's errors.
    `services`: for an action that acts for a tenant as its API keys do (create-api-key), or on the due index
    (release-quarantine)."""
    try:
        if event["admin"] == "create-api-key":
            return admin.issue_api_key(services(), event)
        if event["admin"] == "set-quotas":
            return admin.set_quotas(pool, settings, event)
        if event["admin"] == "rotate-encryption-key":
            return vault.rotate_data_key(require_keyring(keyring), pool)
        if event["admin"] == "release-quarantine":
            return admin.release_quarantine(services(), event)
        if event["admin"] != "create-tenant":
            raise InvalidInputError("admin", "unknown admin action; the ones there are: create-tenant, create-api-key, "
                                             "set-quotas, rotate-encryption-key, release-quarantine")
        return admin.create_tenant_with_key(pool, admin.tenant_name(event.get("name")))
    except TickworkError as exc:
        response = tickwork_error(exc)
        return {"statusCode": response.status_code, **(response.body or {})}
