"""Bearer API keys: the key decides the tenant that every query of the request is scoped to."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Mapping

from aws_lambda_powertools.event_handler.request import Request

from tickwork.dueindex import DueIndex
from tickwork.errors import UnauthorizedError
from tickwork.jobs import Scope
from tickwork.store.tenants import tenant_for_key
from tickwork.wiring import services


def bearer_token(headers: Mapping[str, str]) -> str | None:
    """The token of an `Authorization: Bearer <token>` header (scheme case-insensitive), else None."""
    value = next((v for k, v in headers.items() if k.lower() == "authorization"), None) or ""
    scheme, _, token = value.strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def current_scope(request: Request) -> Scope:
    """Injected into every authenticated route with Depends(): the caller's tenant and the request's `now`."""
    svc = services()
    now = datetime.now(timezone.utc)
    token = bearer_token(request.headers)
    if token is None:
        raise UnauthorizedError("missing API key: send 'Authorization: Bearer <key>'")
    with svc.db.connection() as conn:
        tenant_id = tenant_for_key(conn, token)
    if tenant_id is None:
        raise UnauthorizedError("invalid API key")
    return Scope(svc.db, DueIndex(svc.redis, svc.settings.namespace, svc.settings.due_index_shards), svc.settings, tenant_id, now)
