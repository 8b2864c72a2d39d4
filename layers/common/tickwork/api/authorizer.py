"""The HTTP API's Lambda request authorizer (payload 2.0, simple responses), served by the API function.

API Gateway caches each answer per Authorization header for a short while (template: ReauthorizeEvery).
A revoked key still stops working at once: every route checks the key again itself
(`tickwork.api.auth.current_scope`); the authorizer only keeps keyless and unknown callers from
reaching the function at all.
"""
from __future__ import annotations

from typing import Any, Mapping

from aws_lambda_powertools import Logger

from tickwork.api.auth import bearer_token
from tickwork.store.tenants import tenant_for_key

logger = Logger(child=True)


def is_authorizer_event(event: Mapping[str, Any]) -> bool:
    return event.get("type") == "REQUEST" and "routeArn" in event


def authorize(pool: Any, event: Mapping[str, Any]) -> dict[str, Any]:
    token = bearer_token(event.get("headers") or {})
    if token is None:
        return _refused("no bearer key")
    with pool.connection() as conn:
        tenant_id = tenant_for_key(conn, token)
    if tenant_id is None:
        return _refused("unknown or revoked key")
    return {"isAuthorized": True, "context": {"tenant_id": tenant_id}}


def _refused(reason: str) -> dict[str, Any]:
    # Never the key itself: a near miss of a real key is still a secret.
    logger.info("request not authorized", extra={"reason": reason})
    return {"isAuthorized": False}
