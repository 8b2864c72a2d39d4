"""`${secrets.NAME}` in a job's request: found when the job is saved, replaced just before sending. No I/O.

Replacement is one pass over the template: a secret's value that itself reads `${secrets.X}` is sent as
it is, never expanded again.
"""
from __future__ import annotations

import re
from typing import Any, Iterator, Mapping

from tickwork.errors import UnknownSecretError

NAME_PATTERN = r"[A-Za-z_][A-Za-z0-9_]{0,63}"
NAME = re.compile(rf"^{NAME_PATTERN}$")
_REFERENCE = re.compile(rf"\$\{{secrets\.({NAME_PATTERN})\}}")
_MARK = "${secrets."


def references(request: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(field, secret name) of every reference in a request, the field as the API names it."""
    for field, text in _texts(request):
        if _MARK not in text:  # the common case, checked without the regex (every run asks)
            continue
        for match in _REFERENCE.finditer(text):
            yield field, match.group(1)


def has_references(request: Mapping[str, Any]) -> bool:
    return any(True for _ in references(request))


def expand(text: str, values: Mapping[str, str], used: set[str] | None = None) -> str:
    """`text` with each reference replaced by its value; UnknownSecretError for a name not in `values`.
    The names replaced are added to `used`."""
    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise UnknownSecretError(name)
        if used is not None:
            used.add(name)
        return values[name]

    return _REFERENCE.sub(value, text) if _MARK in text else text


def expand_request(request: Mapping[str, Any], values: Mapping[str, str]) -> tuple[dict[str, Any], set[str]]:
    """The request to send (URL, header values and body expanded) and the names of the secrets it uses."""
    used: set[str] = set()
    expanded = dict(request)
    expanded["url"] = expand(request["url"], values, used)
    expanded["headers"] = {k: expand(v, values, used) for k, v in request.get("headers", {}).items()}
    if isinstance(request.get("body"), str):
        expanded["body"] = expand(request["body"], values, used)
    return expanded, used


def _texts(request: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    yield "request.url", request.get("url") or ""
    for name, value in (request.get("headers") or {}).items():
        yield f"request.headers.{name}", value
    if isinstance(request.get("body"), str):
        yield "request.body", request["body"]
