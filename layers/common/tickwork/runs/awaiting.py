"""Runs awaiting their completion callback (tickwork.runs.completion has the rules): recording the wait,
taking the callback, and settling the wait, by the callback or at its deadline.

The deadline is a one-shot member of the due index (`c:<run>:<attempt>`), so nothing scans for it; the
maintenance pass settles only what that member missed (Redis lost it, or an executor stopped before queueing
it). Settling locks the run, puts it back to `running` inside the same transaction and ends the attempt the
way every attempt ends (tickwork.store.executions.finish_attempt, tickwork.runs.ends): its retry policy,
its job's pause and its notifications apply as to an answer, and a run waiting behind it (overlap queue_one)
is released.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Sequence

from aws_lambda_powertools import Logger

from tickwork.dueindex.index import DueIndex
from tickwork.errors import ConflictError, NotFoundError
from tickwork.http.delivery import Outcome
from tickwork.http.redaction import redact
from tickwork.models import StartedExecution
from tickwork.rules import retry
from tickwork.runs import bounds, completion, ends
from tickwork.secrets.outgoing import TenantSecrets
from tickwork.store import completions as store
from tickwork.store import executions as executions_store
from tickwork.store import notifications as notifications_store
from tickwork.timeutil import rfc3339, to_ms

logger = Logger(child=True)

# Overdue runs the maintenance pass settles at most per pass; the rest wait for the next.
SWEEP_LIMIT = 1000


@dataclass(frozen=True)
class Check:
    """When to settle a run's wait: at its deadline, or at once when its completion is already in."""

    execution_id: str
    attempt: int
    due_ms: int


def record(conn: Any, answered: Sequence[store.Answered], now: datetime) -> tuple[set[str], list[Check]]:
    """Record accepted answers of callback-mode attempts as awaiting; returns the runs still ours and the
    checks to queue (tickwork.dueindex: `schedule_completion_check`)."""
    reported = store.await_completion(conn, answered)
    checks = [Check(a.execution_id, a.number, to_ms(now) if reported[a.execution_id] else to_ms(a.deadline))
              for a in answered if a.execution_id in reported]
    for a in answered:
        if a.execution_id in reported:
            logger.info("run awaiting its completion", extra={
                "execution_id": a.execution_id, "attempt": a.number, "completion_deadline": rfc3339(a.deadline)})
    return set(reported), checks


def queue_checks(index: DueIndex, checks: Sequence[Check], pipeline: Any) -> None:
    for check in checks:
        index.schedule_completion_check(check.execution_id, check.attempt, check.due_ms, pipeline=pipeline)


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
        if settled is None or run is None:
            return None
        decision = _decision(conn, run, settled, now, uniform)
        error = settled.error if decision.reason is None else f"{settled.error}; {decision.reason}"
        started_at, duration_ms, status_code = store.reopen(conn, execution_id, attempt, error, settled.output)
        record = executions_store.AttemptRecord(attempt, started_at, duration_ms, status_code, None, error)
        finished = (execution_id, record, decision.status, decision.next_attempt_at)
        noted, released = _finish(conn, run, finished, Outcome(status_code, None, error, duration_ms), now, operator)
    _queue(index, run, decision, released, noted, now)
    logger.info("run completed by its callback" if waiting.reported else "run's completion timed out", extra={
        "execution_id": execution_id, "job_id": run.job_id, "attempt": attempt, "status": decision.status,
        "error": error})
    return decision.status


def _decision(conn: Any, run: StartedExecution, settled: completion.Settled, now: datetime,
              uniform: retry.Random | None) -> retry.Decision:
    """As after an answer: a failure is retried per the job's policy, bounded by its job (tickwork.runs.bounds)."""
    policy = retry.RetryPolicy.from_dict(run.retry)
    decision = retry.decide(policy, run.attempt, settled.succeeded, True, now, random=uniform)
    if decision.next_attempt_at is None:
        return decision
    limit = bounds.job_bounds(conn, [bounds.Retrying(run.id, run.job_id, run.scheduled_for, run.retry, decision)])[0]
    return retry.within(policy, decision, limit)


def _finish(conn: Any, run: StartedExecution, finished: executions_store.Finished, outcome: Outcome, now: datetime,
            operator: bool) -> tuple[ends.Noted, list[str]]:
    """Write the attempt's end, with its events when it may raise any; returns them and the runs released."""
    status = finished[2]
    if status in executions_store.FINAL_STATUSES and ends.may_notify(run, status, operator):
        noted = ends.record_ends(conn, [ends.Ending(finished, run, outcome)], now, operator)
        return noted, noted.released
    _, freed = executions_store.finish_attempt(conn, *finished)
    return ends.Noted(), [freed] if freed else []


def _queue(index: DueIndex, run: StartedExecution, decision: retry.Decision, released: list[str],
           noted: ends.Noted, now: datetime) -> None:
    pipe = index.pipeline()
    if decision.next_attempt_at is not None:
        index.schedule_execution(run.id, run.attempt + 1, to_ms(decision.next_attempt_at), pipeline=pipe)
    for execution_id in released:
        index.schedule_execution(execution_id, 1, to_ms(now), pipeline=pipe)
    ends.queue(index, noted, to_ms(now), pipe)
    pipe.execute()


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
