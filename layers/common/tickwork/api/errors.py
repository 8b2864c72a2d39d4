"""Errors to HTTP, in one place. Every failure leaves the API as {"error": {"code", "message", "field"}}.

Messages are built from the error's kind and location, never from the input: a rejected header value or
URL may be a secret, and error bodies end up in client logs.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import ApiGatewayResolver
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestUnsupportedContentType, RequestValidationError
from psycopg.errors import QueryCanceled

from tickwork.errors import (
    ConflictError,
    IdempotencyKeyReusedError,
    InvalidInputError,
    InvalidJsonError,
    MissingScopeError,
    NotFoundError,
    PayloadTooLargeError,
    QuotaExceededError,
    RateLimitedError,
    StatementTimeoutError,
    TickworkError,
    UnauthorizedError,
)

logger = Logger(child=True)

_STATUS: tuple[tuple[type[TickworkError], int], ...] = (
    (InvalidInputError, 400),
    (UnauthorizedError, 401),
    (NotFoundError, 404),
    (ConflictError, 409),
    (PayloadTooLargeError, 413),
    (QuotaExceededError, 403),
    (MissingScopeError, 403),
    (IdempotencyKeyReusedError, 422),
    (RateLimitedError, 429),
    (StatementTimeoutError, 503),
)
_LOCATIONS = ("body", "query", "path", "header", "cookie")
_MESSAGES = {"missing": "field required", "extra_forbidden": "unknown field"}


def error_response(
    status: int, code: str, message: str, field: str | None = None, headers: dict[str, str] | None = None
) -> Response:
    body = {"error": {"code": code, "message": message, "field": field}}
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body=body, headers=headers)


def tickwork_error(exc: TickworkError) -> Response:
    status = next((code for cls, code in _STATUS if isinstance(exc, cls)), None)
    if status is None:
        return unexpected_error(exc)
    headers = {"WWW-Authenticate": 'Bearer realm="tickwork"'} if status == 401 else None
    if isinstance(exc, RateLimitedError):
        headers = exc.headers
    return error_response(status, exc.code, exc.message, getattr(exc, "field", None), headers)


def validation_error(exc: RequestValidationError) -> Response:
    """Pydantic's first complaint, with its location as a dotted field name ("request.url")."""
    errors = list(exc.errors())
    first: dict[str, Any] = errors[0] if errors else {"type": "invalid", "loc": ("body",), "msg": "invalid request"}
    if first.get("type") == "json_invalid":
        return tickwork_error(InvalidJsonError("request body is not valid JSON"))
    return error_response(400, InvalidInputError.code, validation_message(first), field_name(first.get("loc", ())))


def not_utf8(_: UnicodeDecodeError) -> Response:
    # Only the request body is decoded from bytes in the API (powertools' decoded_body, before any route).
    return tickwork_error(InvalidJsonError("request body is not UTF-8"))


def unsupported_media_type(_: RequestUnsupportedContentType) -> Response:
    return error_response(415, "unsupported_media_type", "send the request body as application/json", "body")


def query_cancelled(_: QueryCanceled) -> Response:
    """PostgreSQL ended a query at the API's statement timeout (tickwork.wiring.TimedPool): the service is
    fine, this request asked for too much at once."""
    return tickwork_error(StatementTimeoutError(
        "a query of this request ran past the API's statement timeout and was cancelled; ask for less "
        "(a shorter window, a smaller page) or retry later"))


def no_route(allowed: Sequence[str]) -> Response:
    """Unknown path: 404. Known path, other method: 405 with the methods it does accept."""
    if allowed:
        return error_response(405, "method_not_allowed", f"allowed methods: {', '.join(allowed)}",
                              headers={"Allow": ", ".join(allowed)})
    return error_response(404, NotFoundError.code, "no such route")


def unexpected_error(exc: Exception) -> Response:
    logger.exception("unhandled error", extra={"error_type": type(exc).__name__})
    return error_response(500, "internal_error", "internal error")


def field_name(loc: Sequence[Any]) -> str | None:
    """("body", "request", "url") -> "request.url"; a whole-body complaint -> "body"."""
    parts = [str(p) for p in loc]
    if parts and parts[-1] == "[key]":  # pydantic's marker for a bad dict key: name the entry itself
        parts.pop()
    if parts and parts[0] in _LOCATIONS:
        where = parts.pop(0)
        if not parts:
            return "body" if where == "body" else None
        if where == "query":  # a repeated parameter is named, not its n-th value: `status`, not `status.1`
            return parts[0]
    return ".".join(parts) or None


def validation_message(error: Mapping[str, Any]) -> str:
    kind = str(error.get("type", ""))
    return _MESSAGES.get(kind) or str(error.get("msg", "invalid value")).removeprefix("Value error, ")


def register(app: ApiGatewayResolver) -> None:
    """Install the handlers; 404/405 need the app's routes, so the app installs its own not-found handler."""
    app.exception_handler(TickworkError)(tickwork_error)
    app.exception_handler(RequestValidationError)(validation_error)
    app.exception_handler(RequestUnsupportedContentType)(unsupported_media_type)
    app.exception_handler(UnicodeDecodeError)(not_utf8)
    app.exception_handler(QueryCanceled)(query_cancelled)
    app.exception_handler(Exception)(unexpected_error)
