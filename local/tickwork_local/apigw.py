"""API Gateway HTTP API (payload format 2.0) without AWS: an HTTP request in, the Lambda event out, and the
Lambda's result back to an HTTP response. Pure functions, so the shapes are unit-tested without sockets.

The event matches what API Gateway sends for a `$default` route: header names lower-cased with duplicates
comma-joined, cookies moved out of the headers into `cookies`, non-UTF-8 bodies base64-encoded.
"""
from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Sequence
from urllib.parse import parse_qsl

ROUTE_KEY = "$default"
STAGE = "$default"
# The placeholder account id of AWS's own examples (and `sam local`): obviously not a real account.
LOCAL_ACCOUNT_ID = "123456789012"
LOCAL_API_ID = "local"
# What API Gateway answers when the integration fails or returns something it cannot use.
INTERNAL_ERROR_BODY = b'{"message":"Internal Server Error"}'
# The connection and framing are the server's business, never the Lambda's.
_SERVER_OWNED_HEADERS = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive"})
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


class MalformedResponseError(ValueError):
    """The Lambda returned something API Gateway would turn into a 500."""


@dataclass(frozen=True)
class HttpRequest:
    method: str
    target: str  # the request line's path and query, as sent
    headers: Sequence[tuple[str, str]]  # in arrival order, duplicates kept
    body: bytes
    source_ip: str
    server_port: int
    protocol: str = "HTTP/1.1"


@dataclass(frozen=True)
class HttpResponse:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


def build_event(request: HttpRequest, now: float, request_id: str) -> dict[str, Any]:
    """The payload format 2.0 event API Gateway would send for `request` received at `now` (epoch seconds)."""
    path, _, query = request.target.partition("?")
    headers, cookies = _split_headers(request)
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": ROUTE_KEY,
        "rawPath": path,
        "rawQueryString": query,
        "headers": headers,
        "requestContext": _request_context(request, path, headers, now, request_id),
        "isBase64Encoded": False,
    }
    # API Gateway leaves out the optional members rather than sending them empty.
    if cookies:
        event["cookies"] = cookies
    if query:
        event["queryStringParameters"] = _query_parameters(query)
    if request.body:
        event["body"], event["isBase64Encoded"] = _encode_body(request.body)
    return event


def _split_headers(request: HttpRequest) -> tuple[dict[str, str], list[str]]:
    headers: dict[str, str] = {}
    cookies: list[str] = []
    for name, value in request.headers:
        key = name.lower()
        if key == "cookie":
            cookies += [c.strip() for c in value.split(";") if c.strip()]
        else:
            headers[key] = f"{headers[key]},{value}" if key in headers else value
    forwarded = headers.get("x-forwarded-for")
    headers["x-forwarded-for"] = f"{forwarded}, {request.source_ip}" if forwarded else request.source_ip
    headers["x-forwarded-proto"] = "http"
    headers["x-forwarded-port"] = str(request.server_port)
    return headers, cookies


def _query_parameters(query: str) -> dict[str, str]:
    params: dict[str, str] = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        params[name] = f"{params[name]},{value}" if name in params else value
    return params


def _encode_body(body: bytes) -> tuple[str, bool]:
    try:
        return body.decode("utf-8"), False
    except UnicodeDecodeError:
        return base64.b64encode(body).decode("ascii"), True


def _request_context(
    request: HttpRequest, path: str, headers: dict[str, str], now: float, request_id: str
) -> dict[str, Any]:
    domain = _domain_name(headers.get("host", ""))
    return {
        "accountId": LOCAL_ACCOUNT_ID,
        "apiId": LOCAL_API_ID,
        "domainName": domain,
        "domainPrefix": domain.split(".", 1)[0],
        "http": {
            "method": request.method.upper(),
            "path": path,
            "protocol": request.protocol,
            "sourceIp": request.source_ip,
            "userAgent": headers.get("user-agent", ""),
        },
        "requestId": request_id,
        "routeKey": ROUTE_KEY,
        "stage": STAGE,
        "time": _clf_time(now),
        "timeEpoch": int(now * 1000),
    }


def _domain_name(host: str) -> str:
    """The Host header without its port; an IPv6 literal keeps its brackets."""
    if not host:
        return "localhost"
    if host.startswith("["):
        return host.split("]", 1)[0] + "]"
    return host.split(":", 1)[0]


def _clf_time(now: float) -> str:
    """`12/Mar/2020:19:03:58 +0000`, with English month names whatever the locale."""
    utc = datetime.fromtimestamp(now, tz=timezone.utc)
    return f"{utc:%d}/{_MONTHS[utc.month - 1]}/{utc:%Y:%H:%M:%S} +0000"


def http_response(result: Any) -> HttpResponse:
    """Turn a Lambda result into the HTTP response API Gateway would send (format 2.0 rules)."""
    if not (isinstance(result, dict) and "statusCode" in result):
        # Without a statusCode, API Gateway treats the whole result as a 200 JSON body.
        return HttpResponse(200, [("content-type", "application/json")], json.dumps(result).encode())
    headers = [(str(name), _header_value(value)) for name, value in (result.get("headers") or {}).items()
               if str(name).lower() not in _SERVER_OWNED_HEADERS]
    headers += [("set-cookie", str(cookie)) for cookie in result.get("cookies") or []]
    return HttpResponse(_status(result["statusCode"]), headers, _decode_body(result))


def _status(raw: Any) -> int:
    try:
        status = int(raw)
    except (TypeError, ValueError) as exc:
        raise MalformedResponseError(f"statusCode {raw!r} is not an integer") from exc
    if not 100 <= status <= 599:
        raise MalformedResponseError(f"statusCode {status} is out of range")
    return status


def _header_value(value: Any) -> str:
    if isinstance(value, (dict, list)):
        raise MalformedResponseError("header values must be scalars")
    return str(value)


def _decode_body(result: dict[str, Any]) -> bytes:
    body = result.get("body")
    if body is None:
        return b""
    if not isinstance(body, str):
        raise MalformedResponseError("body must be a string")
    if result.get("isBase64Encoded"):
        try:
            return base64.b64decode(body, validate=True)
        except ValueError as exc:
            raise MalformedResponseError("isBase64Encoded is set but body is not base64") from exc
    return body.encode("utf-8")


def internal_error() -> HttpResponse:
    return HttpResponse(500, [("content-type", "application/json")], INTERNAL_ERROR_BODY)
