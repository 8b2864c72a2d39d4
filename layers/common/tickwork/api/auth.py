"""Bearer API keys: the key decides the tenant that every query of the request is scoped to, and whose
request budgets (tickwork.dueindex.ratelimit: the key's own and its tenant's) the request spends."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Callable, Mapping

from aws_lambda_powertools.event_handler.request import Request

from tickwork.dueindex.ratelimit import RateLimiter, key_bucket, tenant_bucket
from tickwork.errors import RateLimitedError, UnauthorizedError
from tickwork.scope import Actor, Scope
from tickwork.store import keys
from tickwork.tenant import access, apikeys
from tickwork.timeutil import to_ms
from tickwork.wiring import Services, api_pool, services

# Where the request's rate-limit decision waits for the middleware that puts it in the response headers.
RATE_LIMIT_CONTEXT = "tickwork_rate_limit"


def bearer_token(headers: Mapping[str, str]) -> str | None:
    """The token of an `Authorization: Bearer <token>` header (scheme case-insensitive), else None."""
    value = next((v for k, v in headers.items() if k.lower() == "authorization"), None) or ""
    scheme, _, token = value.strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def requires(needed: str) -> Callable[[Request], Scope]:
    """The dependency of a route that needs the scope `needed` (tickwork.tenant.access): current_scope, then
    403 missing_scope unless the key holds it. The refused call has spent its token, as any other."""
    def scope_with(request: Request) -> Scope:
        scope = current_scope(request)
        access.check(scope.scopes, needed)
        return scope

    scope_with.__name__ = f"requires_{needed.replace(':', '_')}"
    return scope_with


def current_scope(request: Request) -> Scope:
    """Injected into every authenticated route with Depends(), through `requires` unless the route needs no
    scope: the caller's tenant, key and scopes, and the request's `now`."""
    svc = services()
    now = datetime.fromtimestamp(svc.clock(), timezone.utc)
    token = bearer_token(request.headers)
    if token is None:
        raise UnauthorizedError("missing API key: send 'Authorization: Bearer <key>'")
    with svc.db.connection() as conn:
        caller = apikeys.authenticate(conn, token, now, svc.keyring)
    _spend(svc, request, caller, now)
    return Scope(api_pool(svc), svc.index, svc.settings, caller.tenant_id, now, svc.keyring, caller.scopes,
                 actor(request, caller))


def actor(request: Request, caller: keys.Caller) -> Actor:
    """Who the audit log names for the request's changes: the key (id and name), API Gateway's request id and
    the client's address as API Gateway saw it."""
    context = request.resolved_event.get("requestContext") or {}
    return Actor(caller.key_id, caller.name, context.get("requestId"), (context.get("http") or {}).get("sourceIp"))


def _spend(svc: Services, request: Request, caller: keys.Caller, now: datetime) -> None:
    settings = svc.settings
    buckets = [key_bucket(settings.namespace, caller.key_id, settings.rate_limit_per_second, settings.rate_limit_burst),
               tenant_bucket(settings.namespace, caller.tenant_id, settings.tenant_rate_limit_per_second,
                             settings.tenant_rate_limit_burst)]
    ids = {"key_id": caller.key_id, "tenant_id": caller.tenant_id}
    decision = RateLimiter(svc.redis).take(buckets, to_ms(now), ids)
    if decision is None:
        return
    request.context[RATE_LIMIT_CONTEXT] = decision
    if not decision.allowed:
        whose = "this API key" if decision.scope == "key" else "this tenant (all its API keys together)"
        raise RateLimitedError(f"too many requests for {whose}; retry in {decision.retry_after_seconds}s",
                               decision.headers())
