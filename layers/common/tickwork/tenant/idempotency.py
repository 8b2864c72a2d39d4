"""Idempotent requests: a client that retries a POST with the same Idempotency-Key gets the first answer
again instead of a second job or a second run.

The first request with a key claims it in Postgres (committed at once, so every API environment sees it),
runs, and stores its answer; a later one with the same key and the same request replays that answer, one
with another request is refused, and one arriving while the first is still running is told to retry. Only
successful answers are kept: after an error the key is released, so the corrected request may reuse it.
A claim whose request died mid-way (its Lambda timed out) is taken over once its lease has passed.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Callable

from tickwork.errors import ConflictError, IdempotencyKeyReusedError
from tickwork.store import idempotency as store

KEY_HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
MAX_KEY_LENGTH = 255
# Long enough for a client's retries over a bad day; the maintenance task deletes older keys.
RETENTION = timedelta(hours=24)
# Twice the API function's timeout (29 s): a claim still in flight after that lost its request.
IN_FLIGHT_LEASE = timedelta(seconds=60)


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
             produce: Callable[[], Answer]) -> Answer:
    """`produce()`'s answer, or the stored answer of the first request with this key."""
    with db.connection() as conn:
        if not store.claim(conn, tenant_id, key, request_print, now, now - RETENTION, now - IN_FLIGHT_LEASE):
            return _earlier(store.get(conn, tenant_id, key), request_print)
    try:
        answer = produce()
    except BaseException:
        with db.connection() as conn:
            store.release(conn, tenant_id, key, now)
        raise
    with db.connection() as conn:
        if 200 <= answer.status < 300:
            store.finish(conn, tenant_id, key, now, answer.status, json.dumps(answer.body, separators=(",", ":")))
        else:
            store.release(conn, tenant_id, key, now)
    return answer


def _earlier(state: store.KeyState | None, request_print: bytes) -> Answer:
    if state is not None and state.fingerprint != request_print:
        raise IdempotencyKeyReusedError("this Idempotency-Key was used for a different request")
    if state is None or state.status_code is None:
        raise ConflictError("a request with this Idempotency-Key is still in progress; retry shortly")
    return Answer(state.status_code, json.loads(state.body or "null"), replayed=True)
