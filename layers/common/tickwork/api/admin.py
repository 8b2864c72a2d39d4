"""The API function's other door: operator actions by direct Lambda invoke (tickwork.tenant.operator has them),
answered with the API's error shape."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Mapping

from tickwork.api.errors import tickwork_error
from tickwork.errors import InvalidInputError, TickworkError
from tickwork.secrets import vault
from tickwork.secrets.crypto import require_keyring
from tickwork.tenant import operator
from tickwork.wiring import Services


def is_admin_event(event: Mapping[str, Any]) -> bool:
    return "admin" in event and "requestContext" not in event


def handle_admin(svc: Services, event: Mapping[str, Any]) -> dict[str, Any]:
    """The action's result, or {"statusCode", "error": {"code", "message", "field"}} as the API's errors. An action
    that acts for a tenant as its API keys do (create-api-key), or on the due index (release-quarantine), reads
    the clock of `svc` once."""
    try:
        if event["admin"] == "create-api-key":
            return operator.issue_api_key(svc.db, svc.index, svc.settings, svc.keyring, _now(svc), event)
        if event["admin"] == "set-quotas":
            return operator.set_quotas(svc.db, svc.settings, event)
        if event["admin"] == "rotate-encryption-key":
            return vault.rotate_data_key(require_keyring(svc.keyring), svc.db)
        if event["admin"] == "release-quarantine":
            return operator.release_quarantine(svc.db, svc.index, _now(svc), event)
        if event["admin"] != "create-tenant":
            raise InvalidInputError("admin", "unknown admin action; the ones there are: create-tenant, create-api-key, "
                                             "set-quotas, rotate-encryption-key, release-quarantine")
        return operator.create_tenant_with_key(svc.db, operator.tenant_name(event.get("name")))
    except TickworkError as exc:
        response = tickwork_error(exc)
        return {"statusCode": response.status_code, **(response.body or {})}


def _now(svc: Services) -> datetime:
    return datetime.fromtimestamp(svc.clock(), timezone.utc)
