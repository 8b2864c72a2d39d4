"""`${secrets.NAME}` in a job's request: found when the job is saved, replaced just before sending. No I/O.

Replacement is one pass over the template: a secret's value that itself reads `${secrets.X}` is sent as
it is, never expanded again.

What a request may weigh once its secrets are in is bounded (URL, header names and values together, body):
one executor invocation sends runs of many tenants, and a job whose references multiply 8 KiB secrets
(tens of MB a request) must not take their memory. A job is saved only if it fits with every reference
counted at the largest size a secret may have (`check_worst_case`), so a secret replaced later by a longer
value cannot push it over; the executor expands within the same bounds (`expand_request`), stopping as soon
as one is passed, for jobs saved before the bounds existed.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from tickwork.errors import InvalidInputError, UnknownSecretError

NAME_PATTERN = r"[A-Za-z_][A-Za-z0-9_]{0,63}"
NAME = re.compile(rf"^{NAME_PATTERN}$")
_REFERENCE = re.compile(rf"\$\{{secrets\.({NAME_PATTERN})\}}")
_MARK = "${secrets."

# Bytes (UTF-8) of each part as sent. The URL's and the headers' (names and values together) are what common
# servers accept in all (nginx's four 8 KiB buffers); the body's leaves room for a hundred references.
MAX_EXPANDED_URL_BYTES = 32 * 1024
MAX_EXPANDED_HEADER_BYTES = 32 * 1024
MAX_EXPANDED_BODY_BYTES = 1024 * 1024
_URL, _HEADERS, _BODY = "request.url", "request.headers", "request.body"
_BOUNDS = {_URL: ("the URL", MAX_EXPANDED_URL_BYTES), _HEADERS: ("the headers", MAX_EXPANDED_HEADER_BYTES),
           _BODY: ("the body", MAX_EXPANDED_BODY_BYTES)}


@dataclass
class _Budget:
    """The bytes one part of the request may still take as it is expanded."""

    part: str  # _URL, _HEADERS or _BODY
    left: int

    @classmethod
    def of(cls, part: str) -> _Budget:
        return cls(part, _BOUNDS[part][1])

    def take(self, text: str) -> str:
        self.left -= len(text.encode())
        if self.left < 0:
            what, limit = _BOUNDS[self.part]
            raise InvalidInputError(self.part, f"{what} would be over {limit} bytes with the secrets in")
        return text


def references(request: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(field, secret name) of every reference in a request, the field as the API names it."""
    for field, text in _texts(request):
        if _MARK not in text:  # the common case, checked without the regex (every run asks)
            continue
        for match in _REFERENCE.finditer(text):
            yield field, match.group(1)


def names_in(text: str) -> set[str]:
    """The names of the secrets `text` references."""
    return set(_REFERENCE.findall(text)) if _MARK in text else set()


def has_references(request: Mapping[str, Any]) -> bool:
    return any(True for _ in references(request))


def expand(text: str, values: Mapping[str, str], used: set[str] | None = None, budget: _Budget | None = None) -> str:
    """`text` with each reference replaced by its value; UnknownSecretError for a name not in `values`.
    The names replaced are added to `used`. With a `budget`, InvalidInputError (naming its part) as soon as
    the text so far is over it: the rest is never built."""
    take = budget.take if budget is not None else _as_is
    if _MARK not in text:
        return take(text)
    pieces, start = [], 0
    for match in _REFERENCE.finditer(text):
        name = match.group(1)
        if name not in values:
            raise UnknownSecretError(name)
        if used is not None:
            used.add(name)
        pieces += [take(text[start:match.start()]), take(values[name])]
        start = match.end()
    pieces.append(take(text[start:]))
    return "".join(pieces)


def expand_request(request: Mapping[str, Any], values: Mapping[str, str]) -> tuple[dict[str, Any], set[str]]:
    """The request to send (URL, header values and body expanded, each part within its bound) and the names
    of the secrets it uses; InvalidInputError naming the part that is over its bound."""
    used: set[str] = set()
    expanded = dict(request)
    expanded["url"] = expand(request["url"], values, used, _Budget.of(_URL))
    headers = _Budget.of(_HEADERS)
    expanded["headers"] = {headers.take(k): expand(v, values, used, headers)
                           for k, v in request.get("headers", {}).items()}
    if isinstance(request.get("body"), str):
        expanded["body"] = expand(request["body"], values, used, _Budget.of(_BODY))
    return expanded, used


def check_worst_case(request: Mapping[str, Any], secret_bytes: int) -> None:
    """InvalidInputError naming the field (a header alone over the headers' bound is named) if the request
    could be over a bound once expanded, each reference counted as a secret of `secret_bytes`."""
    headers = {name: len(name.encode()) + worst_case_bytes(value, secret_bytes)
               for name, value in (request.get("headers") or {}).items()}
    body = request.get("body")
    for field, part, size in [
        (_URL, _URL, worst_case_bytes(request.get("url") or "", secret_bytes)),
        *((f"{_HEADERS}.{name}", _HEADERS, size) for name, size in headers.items()),
        (_HEADERS, _HEADERS, sum(headers.values())),
        (_BODY, _BODY, worst_case_bytes(body, secret_bytes) if isinstance(body, str) else 0),
    ]:
        what, limit = _BOUNDS[part]
        if size > limit:
            raise InvalidInputError(field, f"{what} could be {size} bytes with the secrets in, over the bound of "
                                           f"{limit} (each reference counts as {secret_bytes} bytes, the largest "
                                           "a secret may be)")


def worst_case_bytes(text: str, secret_bytes: int) -> int:
    """What `text` may weigh expanded, each reference counted as a secret of `secret_bytes`."""
    size = len(text.encode())
    if _MARK in text:
        size += sum(secret_bytes - len(match.group(0)) for match in _REFERENCE.finditer(text))
    return size


def _as_is(text: str) -> str:
    return text


def _texts(request: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    yield _URL, request.get("url") or ""
    for name, value in (request.get("headers") or {}).items():
        yield f"{_HEADERS}.{name}", value
    if isinstance(request.get("body"), str):
        yield _BODY, request["body"]
