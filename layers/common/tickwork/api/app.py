"""The management API: one APIGatewayHttpResolver (payload format 2.0) with validation on, so the OpenAPI
document at GET /openapi.json is generated from the route signatures and the models in `models.py`."""
from __future__ import annotations

import functools
import json
from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware
from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer

from tickwork.api import audit, bykey, callbacks, console, docs, errors, executions, health, replays, stats
from tickwork.api.auth import RATE_LIMIT_CONTEXT
from tickwork.api.calendars import router as calendars_router
from tickwork.api.body import JsonApiResolver
from tickwork.api.keys import router as keys_router
from tickwork.api.notifications import router as notifications_router
from tickwork.api.routes import router
from tickwork.api.secrets import router as secrets_router
from tickwork.errors import InvalidInputError, TickworkError

API_TITLE = "Tickwork"
API_VERSION = "1.0.0"

app = JsonApiResolver(enable_validation=True)
app.configure_openapi(
    title=API_TITLE,
    version=API_VERSION,
    description="Serverless HTTP cron. Authenticate with 'Authorization: Bearer <API key>'.",
    security_schemes={"apiKey": HTTPBearer(description="A Tickwork API key.")},
    security=[{"apiKey": []}],
)
# By key first: /jobs/by-key/executions is the job keyed "executions", not the executions of a job "by-key".
app.include_router(bykey.router)
app.include_router(router)
for extra in (executions.router, audit.router, replays.router, stats.router, health.router, docs.router, keys_router,
              secrets_router, notifications_router, calendars_router, console.router, callbacks.router):
    app.include_router(extra)
app.add_gate(callbacks.GATE)
errors.register(app)


@app.get("/openapi.json", include_in_schema=False)
def openapi_document() -> Response[str]:
    return Response(status_code=200, content_type=content_types.APPLICATION_JSON, body=openapi_json())


@functools.cache
def openapi_json() -> str:
    """The generated document, minus the 422 powertools adds to every route: validation errors answer 400 here
    (a route's own 422, idempotency_key_reused, stays)."""
    document = json.loads(app.get_openapi_json_schema())
    for item in document.get("paths", {}).values():
        for operation in item.values():
            responses = operation.get("responses", {})
            if "HTTPValidationError" in json.dumps(responses.get("422", {})):
                del responses["422"]
    for unused in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        document.get("components", {}).get("schemas", {}).pop(unused, None)
    return json.dumps(document, separators=(",", ":"))


@app.not_found
def no_route(_: Exception) -> Response[dict]:
    return errors.no_route(allowed_methods(app.current_event.path))


def refuse_unknown_query(resolver: JsonApiResolver, next_middleware: NextMiddleware) -> Response:
    """An unknown query parameter is a 400 naming it, as an unknown body field is: `?limt=5` must not
    quietly list the default 50. Runs after powertools' validation of the known ones."""
    event = resolver.current_event
    known = query_names(event.path, event.http_method.upper())
    unknown = sorted(set(event.query_string_parameters or {}) - known) if known is not None else []
    if unknown:
        raise InvalidInputError(unknown[0], "unknown query parameter")
    return next_middleware(resolver)


def rate_limit_headers(resolver: JsonApiResolver, next_middleware: NextMiddleware) -> Response:
    """RateLimit-Limit/-Remaining/-Reset on every answer to a request that spent a token, errors included."""
    try:
        response = next_middleware(resolver)
    except TickworkError as exc:
        response = errors.tickwork_error(exc)
    decision = resolver.context.get(RATE_LIMIT_CONTEXT)
    if decision is not None:
        response.headers.update(decision.headers())
    return response


app.use(middlewares=[refuse_unknown_query, rate_limit_headers])


def allowed_methods(path: str) -> list[str]:
    """The methods some route accepts at `path`, read from the OpenAPI paths (the app's own route list)."""
    segments = path.strip("/").split("/")
    return sorted({method for template, method, _ in _operations() if _matches(template, segments)})


def query_names(path: str, method: str) -> frozenset[str] | None:
    """The query parameters the operation at (`path`, `method`) takes; None for a route not documented."""
    segments = path.strip("/").split("/")
    matching = (names for template, known, names in _operations() if known == method and _matches(template, segments))
    return next(matching, None)


@functools.cache
def _operations() -> tuple[tuple[tuple[str, ...], str, frozenset[str]], ...]:
    """(path template segments, METHOD, its query parameter names) for every documented operation."""
    paths: dict[str, dict[str, Any]] = json.loads(openapi_json()).get("paths", {})
    return tuple(
        (tuple(template.strip("/").split("/")), method.upper(),
         frozenset(p["name"] for p in operation.get("parameters", []) if p.get("in") == "query"))
        for template, item in paths.items() for method, operation in item.items()
    )


def _matches(template: tuple[str, ...], segments: list[str]) -> bool:
    return len(template) == len(segments) and all(
        want.startswith("{") or want == got for want, got in zip(template, segments)
    )
