"""Secrets a job sends, and keeping them out of everything shown or stored.

A header is sensitive by its name. The API shows its value as REDACTED; a target that echoes the
request back (an error page quoting it, a debugging endpoint) must not get it into stored history
either: `redact` replaces the request's secret values in response bodies and errors. Query parameters
named like a sensitive header (`?api_key=`, `?token=`) count as secrets too.
"""
from __future__ import annotations

import json
from functools import lru_cache
from typing import Iterator, Mapping, Sequence, overload
from urllib.parse import quote, unquote_plus

REDACTED = "***"
_SENSITIVE_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key"})
_SENSITIVE_PARTS = ("token", "secret", "key", "password", "passwd", "auth", "cookie", "credential", "signature")
# Shorter values are no secret worth the name, and replacing them everywhere would garble whole bodies.
MIN_SECRET_CHARS = 4


# Header names repeat from attempt to attempt: each is judged once (per execution environment).
@lru_cache(maxsize=4096)
def is_sensitive_header(name: str) -> bool:
    lower = name.lower()
    return lower in _SENSITIVE_HEADERS or any(part in lower for part in _SENSITIVE_PARTS)


def secret_values(headers: Mapping[str, str], query: str, interpolated: Sequence[str] = ()) -> tuple[str, ...]:
    """What `redact` hides for a request: each sensitive value as sent and each secret `interpolated`
    into it, its credentials without the auth scheme (`Bearer <token>`), and how JSON and
    percent-encoding spell them; longest first."""
    return _spellings((*_sensitive_values(headers, query), *interpolated))


def spellings(values: Sequence[str]) -> tuple[str, ...]:
    """How `redact` finds each of `values` (secrets interpolated into a request): as is, JSON- and
    percent-encoded, and without an auth scheme."""
    return _spellings(tuple(values)) if values else ()


@lru_cache(maxsize=1024)  # a job's secrets are the same at every attempt
def _spellings(values: tuple[str, ...]) -> tuple[str, ...]:
    found: set[str] = set()
    for value in values:
        for part in (value.strip(), value.strip().partition(" ")[2]):
            if len(part) >= MIN_SECRET_CHARS:
                found |= {part, json.dumps(part)[1:-1], quote(part, safe="")}
    return tuple(sorted(found, key=len, reverse=True))


def _sensitive_values(headers: Mapping[str, str], query: str) -> Iterator[str]:
    yield from (value for name, value in headers.items() if is_sensitive_header(name))
    for pair in query.split("&") if query else ():
        name, _, value = pair.partition("=")
        if is_sensitive_header(unquote_plus(name)):
            yield from (value, unquote_plus(value))


@overload
def redact(text: str, secrets: Sequence[str], cut: bool = False) -> str: ...


@overload
def redact(text: None, secrets: Sequence[str], cut: bool = False) -> None: ...


def redact(text: str | None, secrets: Sequence[str], cut: bool = False) -> str | None:
    """`text` with every secret replaced by REDACTED. `cut`: the text was truncated, so a secret's
    beginning at its very end is replaced too."""
    if not text or not secrets:
        return text
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    if cut:
        for secret in secrets:
            partial = next((n for n in range(len(secret) - 1, 0, -1) if text.endswith(secret[:n])), 0)
            if partial:
                return text[:-partial] + REDACTED
    return text
