"""Runs awaiting their completion callback (tickwork.rules.completion has the rules; the wait is recorded as the
executor ends an accepted attempt, tickwork.runs.ending): taking the callback, and settling the wait, by the
callback or at its deadline.

The deadline is a one-shot member of the due index (`c:<run>:<attempt>`), so nothing scans for it; the
maintenance pass settles only what that member missed (Redis lost it, or an executor stopped before queueing
it). Settling locks the run, puts it back to `running` inside the same transaction and ends the attempt the
way every attempt ends (tickwork.runs.ending): its retry policy (a replay's attempts counted as the replay's),
its job's bounds, its job's pause and its notifications apply as to an answer, and a run waiting behind it
(overlap queue_one) is released.
"""
from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from aws_lambda_powertools import Logger

from tickwork.dueindex.index import DueIndex
from tickwork.errors import ConflictError, NotFoundError
from tickwork.http.redaction import redact
from tickwork.models import StartedExecution
from tickwork.rules import retry
from tickwork.rules import completion
from tickwork.runs import ending
from tickwork.secrets.outgoing import TenantSecrets
from tickwork.store import completions as store
from tickwork.store import notifications as notifications_store

logger = Logger(child=True)

# Overdue runs the maintenance pass settles at most per pass; the rest wait for the next.
SWEEP_LIMIT = 1000


@dataclass(frozen=True)
class Answer:
    """What a callback did: the run's status after it."""

    execution_id: str
    attempt: int
    status: str


def take_callback(svc: Any, execution_id: str, attempt: str, token: str, status: str, output: str | None,
                  now: datetime, uniform: retry.Random | None = None) -> Answer:
    """A call of a callback URL. A token that is not the one of that run's attempt is a NotFoundError (never
    saying which part is wrong); the right token once its completion is in, or its run over, a ConflictError."""
    number, token_hash = _attempt_number(execution_id, attempt), completion.token_hash(token)
    with svc.db.connection() as conn:
        _check_token(conn, execution_id, number, token_hash)
        run = notifications_store.run_of(conn, execution_id)
        kept = None if run is None else store.report(
            conn, execution_id, number, token_hash, status, _redacted(svc, run, output, token))
        if kept is None:
            raise ConflictError("this attempt's completion was reported already, or its run is over")
        ended = settle(conn, svc.index, execution_id, number, now, bool(svc.settings.operator_topic_arn), uniform) \
            if kept == completion.AWAITING else None
    logger.info("completion reported by callback", extra={
        "execution_id": execution_id, "job_id": run.job_id if run else None, "attempt": number, "reported": status,
        "status": ended or kept})
    return Answer(execution_id, number, ended or kept)


def check_token(svc: Any, execution_id: str, attempt: str, token: str) -> None:
    """NotFoundError unless `token` is the one of that run's attempt, as `take_callback` checks it: what the
    API asks before it reads a callback's body, so a wrong token costs one indexed read and no parse."""
    number = _attempt_number(execution_id, attempt)
    with svc.db.connection() as conn:
        _check_token(conn, execution_id, number, completion.token_hash(token))


def _check_token(conn: Any, execution_id: str, number: int, token_hash: bytes) -> None:
    if not store.knows_token(conn, execution_id, number, token_hash):
        raise NotFoundError("no such callback")


def _attempt_number(execution_id: str, attempt: str) -> int:
    try:
        uuid.UUID(execution_id)
        number = int(attempt)
    except ValueError:
        raise NotFoundError("no such callback") from None
    if not 1 <= number <= 2**31 - 1:
        raise NotFoundError("no such callback")
    return number


def _redacted(svc: Any, run: StartedExecution, output: str | None, token: str) -> str | None:
    """The output as a response body is stored: the request's secret values (and the token) replaced. The
    secrets are read as they are now, never refused: the tenant may have changed them since the attempt was
    sent, and that must not lose the completion (a secret replaced since is redacted by its new value only)."""
    if not output:
        return output
    return redact(output, TenantSecrets(svc, svc.clock).values_to_redact(run, token))


def settle(conn: Any, index: DueIndex, execution_id: str, attempt: int, now: datetime, operator: bool,
           uniform: retry.Random | None = None) -> str | None:
    """End the wait of `attempt` if its completion is in or its deadline has passed; returns the run's new
    status, or None (not awaiting that attempt any more, or still awaiting it)."""
    with conn.transaction():
        waiting = store.lock_awaiting(conn, execution_id, attempt)
        settled = None if waiting is None else completion.settle(waiting, now)
        run = None if settled is None else notifications_store.run_of(conn, execution_id)
        if waiting is None or settled is None or run is None:
            return None
        settling = ending.settled(run, waiting, settled, now, uniform)
        [ended] = ending.bound(lambda: contextlib.nullcontext(conn), [settling])
        store.reopen(conn, execution_id, attempt, ended.error, settled.output)
        written = ending.write(conn, [ended], now, operator)
    ending.queue(index, written, now)
    logger.info("run completed by its callback" if waiting.reported else "run's completion timed out", extra={
        "execution_id": execution_id, "job_id": run.job_id, "attempt": attempt, "status": ended.status,
        "error": ended.error})
    return ended.status


def sweep(conn: Any, index: DueIndex, now: datetime, grace_seconds: int, operator: bool,
          uniform: retry.Random | None = None) -> int:
    """Settle the runs whose check the due index did not make: awaiting more than `grace_seconds` past their
    deadline, or with their completion in. Returns how many ended their wait."""
    settled = sum(1 for execution_id, attempt in store.overdue(conn, now - timedelta(seconds=grace_seconds),
                                                               SWEEP_LIMIT)
                  if settle(conn, index, execution_id, attempt, now, operator, uniform) is not None)
    if settled:
        logger.warning("settled runs awaiting their completion whose check was lost", extra={"runs": settled})
    return settled
