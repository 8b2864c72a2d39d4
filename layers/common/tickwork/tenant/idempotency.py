"""Idempotent requests: a client that retries a POST with the same Idempotency-Key gets the first answer
again instead of a second job or a second run.

The first request with a key claims it in Postgres (committed at once, so every API environment sees it),
runs, and stores its answer; a later one with the same key and the same request replays that answer, one
with another request is refused, and one arriving while the first is still running is told to retry. Only
successful answers are kept: after an error the key is released, so the corrected request may reuse it.
A claim whose request died mid-way (its Lambda timed out) is taken over once its lease has passed.

An answer over MAX_ANSWER_BYTES is not kept: only the id of what the request made is, and a retry reads that
afresh (`reread`), so it answers the job as it is now and never runs the request twice; when it cannot (the
job is gone, or the route reads nothing again), the retry is a 409 saying so. A tenant's keys are also bounded
in number and in its storage budget (tickwork.ops.storage).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Callable

from tickwork.errors import ConflictError, IdempotencyKeyReusedError, NotFoundError
from tickwork.store import idempotency as store

KEY_HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
MAX_KEY_LENGTH = 255
# Long enough for a client's retries over a bad day; the maintenance task deletes older keys.
RETENTION = timedelta(hours=24)
# Twice the API function's timeout (29 s): a claim still in flight after that lost its request.
IN_FLIGHT_LEASE = timedelta(seconds=60)
# Above any answer but a job's with a long body or many long headers (a job is ~2 KB, a replay listing its
# 1,000 run ids ~40 KB), and 100 times below the 6 MB such an answer may reach.
MAX_ANSWER_BYTES = 65_536


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any  # the JSON value sent
    replayed: bool = False


def fingerprint(method: str, path: str, body: Any) -> bytes:
    """What makes two requests "the same": method, path and the JSON body, key order and spacing aside."""
    canonical = json.dumps([method.upper(), path, body], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).digest()


def run_once(db: Any, tenant_id: str, key: str, request_print: bytes, now: datetime,
             produce: Callable[[], Answer], reread: Callable[[str], Any] | None = None) -> Answer:
    """`produce()`'s answer, or the stored answer of the first request with this key; `reread(id)` is the
    answer's body as of now, for an answer too large to keep (its `id`)."""
    with db.connection() as conn:
        if not store.claim(conn, tenant_id, key, request_print, now, now - RETENTION, now - IN_FLIGHT_LEASE):
            return _earlier(store.get(conn, tenant_id, key), request_print, reread)
    try:
        answer = produce()
    except BaseException:
        with db.connection() as conn:
            store.release(conn, tenant_id, key, now)
        raise
    with db.connection() as conn:
        if 200 <= answer.status < 300:
            body, answer_bytes = kept(answer.body)
            store.finish(conn, tenant_id, key, now, answer.status, body, answer_bytes)
        else:
            store.release(conn, tenant_id, key, now)
    return answer


def kept(body: Any) -> tuple[str, int | None]:
    """What is stored of an answer's body, and its size when that is too large to keep (then only its id)."""
    text = json.dumps(body, separators=(",", ":"))
    size = len(text.encode())
    if size <= MAX_ANSWER_BYTES:
        return text, None
    return json.dumps({"id": body.get("id") if isinstance(body, dict) else None}), size


def _earlier(state: store.KeyState | None, request_print: bytes, reread: Callable[[str], Any] | None) -> Answer:
    if state is not None and state.fingerprint != request_print:
        raise IdempotencyKeyReusedError("this Idempotency-Key was used for a different request")
    if state is None or state.status_code is None:
        raise ConflictError("a request with this Idempotency-Key is still in progress; retry shortly")
    if state.answer_bytes is None:
        return Answer(state.status_code, json.loads(state.body or "null"), replayed=True)
    return Answer(state.status_code, _reread(state, state.answer_bytes, reread), replayed=True)


def _reread(state: store.KeyState, size: int, reread: Callable[[str], Any] | None) -> Any:
    made = (json.loads(state.body or "null") or {}).get("id")
    said = (f"this Idempotency-Key's request ran already{f' and made {made}' if made else ''}; its answer was "
            f"too large to keep ({size} bytes, over {MAX_ANSWER_BYTES})")
    if made is None or reread is None:
        raise ConflictError(f"{said}, and this request's answer cannot be read again", field=KEY_HEADER)
    try:
        return reread(made)
    except NotFoundError:
        raise ConflictError(f"{said}, and {made} is gone now", field=KEY_HEADER) from None
