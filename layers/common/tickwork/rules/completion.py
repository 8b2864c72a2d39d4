"""How a run ends: by its target's answer (`response`, the default) or by a later call of its own
(`callback`). Pure: no I/O, `now` passed in.

In callback mode every attempt carries `Tickwork-Callback-Url`: the public API's
`/callbacks/<execution id>/<attempt>/<token>`, with a token made for that attempt alone (only its SHA-256 is
stored). The target's accepted answer leaves the run `awaiting_completion` until the target POSTs
`{"status": "succeeded" | "failed", "output": "..."}` there, or the job's `timeout_seconds` pass (the run's
attempt then fails with `no completion within N s`). A `failed` completion, or none in time, is a failed
attempt like a 5xx answer: the job's retry policy and notifications apply, and a retry gets a new token.
"""
from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Mapping

from tickwork import defaults
from tickwork.vocab import RunStatus

MODES = ("response", "callback")
CALLBACK = "callback"
# A day: longer work is a workflow's job, and a run awaiting holds its job's overlap for that long.
MAX_TIMEOUT_SECONDS = 86_400
DEFAULT_TIMEOUT_SECONDS = defaults.COMPLETION_TIMEOUT_SECONDS
# As much of the output as a response body's preview: what a person reads on the run's page.
MAX_OUTPUT_BYTES = 4096
STATUSES = (RunStatus.SUCCEEDED, RunStatus.FAILED)  # what a callback may report
PATH_PREFIX = "/callbacks/"
# 32 random bytes, URL-safe: the token is the caller's only credential.
TOKEN_BYTES = 32
AWAITING = RunStatus.AWAITING_COMPLETION
FAILED_NOTE = "failed: reported by its completion callback"
_CALLBACK_PATH = re.compile(r"(/callbacks/[^/\s]+/[^/\s]+/)[^/?#\s]+")


def is_callback(completion: Mapping[str, Any] | None) -> bool:
    return bool(completion) and completion.get("mode") == CALLBACK  # type: ignore[union-attr]


def timeout_seconds(completion: Mapping[str, Any] | None) -> int:
    """How long a run of a callback-mode job awaits its completion."""
    return int((completion or {}).get("timeout_seconds") or DEFAULT_TIMEOUT_SECONDS)


def stored(completion: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The job's column: None for response mode (what every job did before), else mode and timeout."""
    if not is_callback(completion):
        return None
    return {"mode": CALLBACK, "timeout_seconds": timeout_seconds(completion)}


def shown(completion: Mapping[str, Any] | None) -> dict[str, Any]:
    """The job's `completion` as the API shows it."""
    return stored(completion) or {"mode": "response", "timeout_seconds": None}


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def callback_url(public_api_url: str, execution_id: str, attempt: int, token: str) -> str:
    return f"{public_api_url.rstrip('/')}{PATH_PREFIX}{execution_id}/{attempt}/{token}"


def loggable_path(path: str | None) -> str | None:
    """A request path (or request line) as it may be logged: a callback's token replaced by `***` (it is a
    credential)."""
    return path if path is None else _CALLBACK_PATH.sub(r"\1***", path)


def output_error(output: str | None) -> str | None:
    """Why a callback's output cannot be stored, or None."""
    if output is None:
        return None
    if "\x00" in output:
        return "must not contain NUL characters"
    if len(output.encode()) > MAX_OUTPUT_BYTES:
        return f"must be at most {MAX_OUTPUT_BYTES} bytes (UTF-8)"
    return None


def deadline(now: datetime, completion: Mapping[str, Any] | None) -> datetime:
    return now + timedelta(seconds=timeout_seconds(completion))


@dataclass(frozen=True)
class Awaiting:
    """A run awaiting its completion as locked for settling it, with its attempt's answer as recorded."""

    execution_id: str
    attempt: int
    deadline: datetime
    timeout_seconds: int
    reported: str | None  # the status a callback reported for this attempt, if one did
    output: str | None
    started_at: datetime  # when the attempt was sent
    duration_ms: int
    status_code: int | None


@dataclass(frozen=True)
class Settled:
    """How the awaited attempt ends: succeeded, or failed with its error (retried per the job's policy)."""

    succeeded: bool
    error: str | None
    output: str | None


def settle(run: Awaiting, now: datetime) -> Settled | None:
    """The end of an awaited attempt: what its callback reported, else a failure once its deadline has
    passed; None while it may still be called."""
    if run.reported is not None:
        ok = run.reported == RunStatus.SUCCEEDED
        return Settled(ok, None if ok else FAILED_NOTE, run.output)
    if now >= run.deadline:
        return Settled(False, f"no completion within {run.timeout_seconds} s", None)
    return None
