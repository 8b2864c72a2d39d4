"""Tenants and their jobs made as a client makes them: through the API function's handler, called in this
process with the event API Gateway would send (the local runtime's `apigw.build_event`), so validation,
quotas and the per-key rate limit apply as they do in a deployment. A tenant and its first API key come
from the operator's admin event (`{"admin": "create-tenant"}`, tickwork.tenant.operator).
"""
from __future__ import annotations

import contextlib
import json
import time
import uuid
from dataclasses import dataclass, replace
from typing import Any, Iterator

from tickwork.wiring import Services, configure
from tickwork_local.apigw import HttpRequest, build_event
from tickwork_local.functions import API_TIMEOUT_SECONDS, FUNCTIONS_DIR, LambdaFunction, load_handler

# A 429 without Retry-After (it always carries one) is retried after this long.
DEFAULT_RETRY_AFTER_SECONDS = 1.0
# Rate-limited answers one call waits out before giving up.
MAX_RATE_LIMITED = 30
LOCAL_PORT = 3000


@dataclass(frozen=True)
class Reply:
    status: int
    body: Any


class ApiRefusedError(RuntimeError):
    """The API refused what the benchmark needs to set up (not what it tries on purpose)."""


class InProcessApi:
    """The API function of `svc` (installed as the handlers' services while open)."""

    def __init__(self, svc: Services) -> None:
        self.svc = svc
        self.function = LambdaFunction("tickwork-api", load_handler(FUNCTIONS_DIR, "api"), API_TIMEOUT_SECONDS)
        configure(svc)

    def close(self) -> None:
        configure(None)

    def create_tenant(self, name: str) -> str:
        """The tenant's bootstrap API key."""
        result = self.function.invoke({"admin": "create-tenant", "name": name})
        if "api_key" not in result:
            raise ApiRefusedError(f"create-tenant {name!r}: {result}")
        return str(result["api_key"])

    @contextlib.contextmanager
    def set_back(self, seconds: float) -> Iterator[None]:
        """Calls inside see a `now` this many seconds ago (the API's clock, Services.clock, as tests pin it)."""
        configure(replace(self.svc, clock=lambda: time.time() - seconds))
        try:
            yield
        finally:
            configure(self.svc)

    def call(self, key: str, method: str, path: str, body: Any = None) -> Reply:
        """One request; a 429 is waited out (Retry-After) and sent again."""
        for _ in range(MAX_RATE_LIMITED):
            result = self.function.invoke(_event(key, method, path, body))
            if result["statusCode"] != 429:
                raw = result.get("body") or ""
                return Reply(result["statusCode"], json.loads(raw) if raw else None)
            time.sleep(float((result.get("headers") or {}).get("Retry-After", DEFAULT_RETRY_AFTER_SECONDS)))
        raise ApiRefusedError(f"{method} {path}: still rate limited after {MAX_RATE_LIMITED} answers")

    def require(self, key: str, method: str, path: str, body: Any = None) -> Any:
        reply = self.call(key, method, path, body)
        if reply.status >= 300:
            raise ApiRefusedError(f"{method} {path}: {reply.status} {reply.body}")
        return reply.body


def _event(key: str, method: str, path: str, body: Any) -> dict[str, Any]:
    headers = [("host", f"127.0.0.1:{LOCAL_PORT}"), ("authorization", f"Bearer {key}")]
    raw = b""
    if body is not None:
        raw = json.dumps(body).encode()
        headers += [("content-type", "application/json"), ("content-length", str(len(raw)))]
    request = HttpRequest(method, path, headers, raw, "127.0.0.1", LOCAL_PORT)
    return build_event(request, time.time(), uuid.uuid4().hex)
