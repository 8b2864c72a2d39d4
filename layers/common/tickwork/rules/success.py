"""A job's success rules: which answers count as a successful attempt. Pure, no I/O.

`success` is `{"status_codes": [200, "2xx", ...], "body_contains": "..."}`, both optional; without it (or
without `status_codes`) any 2xx succeeds, as before these rules existed.
"""
from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Mapping, Sequence

from tickwork.outcome import FailureKind, Outcome
from tickwork.rules.retry import is_retryable_status

DEFAULT_STATUS_CODES = ("2xx",)
MAX_STATUS_CODES = 20
MAX_BODY_CONTAINS = 1024
_CLASS = re.compile(r"^[1-5]xx$")


def status_range(entry: Any) -> tuple[int, int]:
    """An entry's inclusive range of codes: 204 -> (204, 204), "2xx" -> (200, 299); ValueError if invalid."""
    if isinstance(entry, bool):
        raise ValueError("entries are status codes (100-599) or classes like \"2xx\"")
    if isinstance(entry, int) and 100 <= entry <= 599:
        return entry, entry
    if isinstance(entry, str):
        text = entry.strip().lower()
        if _CLASS.match(text):
            first = int(text[0]) * 100
            return first, first + 99
        if text.isdigit() and 100 <= int(text) <= 599:
            return int(text), int(text)
    raise ValueError("entries are status codes (100-599) or classes like \"2xx\"")


def normalized_codes(entries: Sequence[Any]) -> list[int | str]:
    """Entries as stored: codes as integers, classes as "2xx"; raises ValueError naming the problem."""
    if not entries:
        raise ValueError("must list at least one status code or class")
    stored: list[int | str] = []
    for entry in entries:
        low, high = status_range(entry)
        stored.append(low if low == high else f"{low // 100}xx")
    return stored


def accepts(rules: Mapping[str, Any] | None, status_code: int) -> bool:
    entries = (rules or {}).get("status_codes") or DEFAULT_STATUS_CODES
    return any(low <= status_code <= high for low, high in map(status_range, entries))


def status_failure(status_code: int) -> FailureKind | None:
    """What an answer's status means by default (without success rules): any 2xx succeeds."""
    if 200 <= status_code < 300:
        return None
    if 300 <= status_code < 400:
        return FailureKind.REDIRECT
    if status_code >= 400 and is_retryable_status(status_code):
        return FailureKind.TRANSIENT_STATUS
    return FailureKind.REJECTED_STATUS


def judge(rules: Mapping[str, Any] | None, outcome: Outcome) -> Outcome:
    """The outcome under the job's rules: an answer they do not accept is a failed attempt with the reason
    (retried like any transient failure when its status is below 400, else as its status says); without
    rules, unchanged."""
    if not rules or outcome.status_code is None:
        return outcome
    code = outcome.status_code
    refused = FailureKind.SUCCESS_RULE if code < 400 else status_failure(code)
    if not accepts(rules, code):
        listed = ", ".join(str(e) for e in rules.get("status_codes") or DEFAULT_STATUS_CODES)
        return replace(outcome, failure=refused, error=f"HTTP {code} not accepted (success.status_codes: {listed})")
    needle = rules.get("body_contains")
    if needle and needle not in (outcome.body or ""):
        return replace(outcome, failure=refused,
                       error=f"HTTP {code}: the response body does not contain success.body_contains")
    return replace(outcome, failure=None, error=None)
