"""Request bodies: JSON only, read with bounds no hostile body gets past.

powertools parses the body inside its validation middleware, before any route or middleware of ours runs,
so the bounds live in the deserializer it is given and in the one method the resolver exposes, `resolve`.
"""
from __future__ import annotations

import json
import math
from typing import Any, Mapping

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver

from tickwork.errors import InvalidJsonError

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


class JsonApiResolver(APIGatewayHttpResolver):
    """An APIGatewayHttpResolver whose request bodies are JSON or nothing."""

    def resolve(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        return super().resolve(json_only(event), context)


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
