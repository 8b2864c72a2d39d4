"""Request bodies: JSON only, read with bounds no hostile body gets past.

powertools parses the body inside its validation middleware, before any route or middleware of ours runs,
so the bounds live in the deserializer it is given and in the one method the resolver exposes, `resolve`:
there a route without an API key (a completion callback) checks the credential in its path, and the size
of its body, before anything reads the body (`BodyGate`).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.event_handler.api_gateway import ResponseBuilder
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2

from tickwork.api.errors import tickwork_error
from tickwork.errors import InvalidJsonError, PayloadTooLargeError, TickworkError

# The deepest Tickwork body (a job's request.headers) is 3 levels; anything far deeper is not one of ours.
MAX_JSON_DEPTH = 32
# No field takes a longer number; past this json.loads would spend quadratic time in int() (CPython stops
# at 4,300 digits with a ValueError, which would be a 500).
MAX_INT_DIGITS = 64
_CONTENT_TYPE = "content-type"
# powertools reads a body with no type, or one of application/json*, as JSON; it also parses form and
# multipart bodies, which this API does not take (a multipart type without a boundary even raises a bare
# ValueError there). Any other type makes it raise RequestUnsupportedContentType: the 415 of docs/api.md.
_JSON_PREFIX = "application/json"
_NOT_JSON = "application/x-tickwork-not-json"


@dataclass(frozen=True)
class BodyGate:
    """What a route checks before its body is read: `admit` gets the path's parameters and raises a
    TickworkError to refuse the request; then the body may be at most `max_bytes`."""

    method: str
    path: str  # as the route is declared: "/callbacks/<execution_id>/<attempt>/<token>"
    max_bytes: int
    admit: Callable[[Mapping[str, str]], None]

    def parameters(self, method: str, path: str) -> dict[str, str] | None:
        """The path's parameters if the request is one this gate checks, else None. Matches every path the
        route's own pattern does (a parameter is any non-empty segment), so nothing reaches it unchecked."""
        wanted, segments = self.path.strip("/").split("/"), path.strip("/").split("/")
        if method.upper() != self.method or len(wanted) != len(segments):
            return None
        found: dict[str, str] = {}
        for want, got in zip(wanted, segments):
            if want.startswith("<") and got:
                found[want[1:-1]] = got
            elif want != got:
                return None
        return found

    def check(self, event: Mapping[str, Any], parameters: Mapping[str, str]) -> None:
        self.admit(parameters)
        if body_bytes(event, self.max_bytes) > self.max_bytes:
            raise PayloadTooLargeError(f"the body is over {self.max_bytes} bytes, the most this route takes")


class JsonApiResolver(APIGatewayHttpResolver):
    """An APIGatewayHttpResolver whose request bodies are JSON or nothing, each parsed with `parse_json`
    (looked up at each call, so a test can count the bodies parsed), and read only once its route's gate, if
    it has one, let the request through."""

    def __init__(self, **options: Any) -> None:
        super().__init__(json_body_deserializer=_deserialize, **options)
        self._gates: list[BodyGate] = []

    def add_gate(self, gate: BodyGate) -> None:
        self._gates.append(gate)

    def resolve(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        event = json_only(event)
        refused = self._refusal(event)
        return refused if refused is not None else super().resolve(event, context)

    def _refusal(self, event: Mapping[str, Any]) -> dict[str, Any] | None:
        """The answer to a request its gate refuses, built as powertools builds every answer; None otherwise."""
        method = ((event.get("requestContext") or {}).get("http") or {}).get("method") or ""
        for gate in self._gates:
            parameters = gate.parameters(method, event.get("rawPath") or "")
            if parameters is None:
                continue
            try:
                gate.check(event, parameters)
            except TickworkError as exc:
                builder = ResponseBuilder[APIGatewayProxyEventV2](tickwork_error(exc))
                return builder.build(APIGatewayProxyEventV2(dict(event)))
        return None


def _deserialize(text: str) -> Any:
    return parse_json(text)


def body_bytes(event: Mapping[str, Any], enough: int) -> int:
    """The size of the event's body in bytes, without decoding it; exact up to `enough`, past it at least that."""
    body = event.get("body") or ""
    if event.get("isBase64Encoded"):
        return len(body) * 3 // 4 - body[-2:].count("=")
    return len(body) if len(body) > enough else len(body.encode())


def json_only(event: Mapping[str, Any]) -> Mapping[str, Any]:
    """The event, with a content type other than JSON replaced by one powertools refuses to parse."""
    headers: dict[str, str] = dict(event.get("headers") or {})
    name = next((key for key in headers if key.lower() == _CONTENT_TYPE), None)
    kind = headers.get(name, "").strip() if name else ""
    if not kind or kind.startswith(_JSON_PREFIX):
        return event
    headers[name or _CONTENT_TYPE] = _NOT_JSON
    return {**event, "headers": headers}


def parse_json(text: str) -> Any:
    """The body's JSON value (the resolver's json_body_deserializer); InvalidJsonError for what RFC 8259
    refuses (NaN, Infinity) and for nesting deeper than MAX_JSON_DEPTH. Malformed JSON keeps raising
    json.JSONDecodeError, which powertools reports as a validation error."""
    try:
        value = json.loads(text, parse_int=_integer, parse_constant=_no_constant)
    except RecursionError:
        raise InvalidJsonError(f"the JSON is nested deeper than {MAX_JSON_DEPTH} levels") from None
    if _deeper_than(value, MAX_JSON_DEPTH):
        raise InvalidJsonError(f"the JSON is nested deeper than {MAX_JSON_DEPTH} levels")
    return value


def _integer(text: str) -> int | float:
    # Infinity, which every field refuses by name ("count": not a finite number), rather than a body error.
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        return -math.inf if text.startswith("-") else math.inf
    return int(text)


def _no_constant(_: str) -> Any:
    raise InvalidJsonError("NaN and Infinity are not JSON numbers")


def _deeper_than(value: Any, limit: int) -> bool:
    level = [value]
    for _ in range(limit):
        level = [child for item in level for child in _children(item)]
        if not level:
            return False
    return True


def _children(value: Any) -> Any:
    if isinstance(value, dict):
        return value.values()
    return value if isinstance(value, list) else ()
