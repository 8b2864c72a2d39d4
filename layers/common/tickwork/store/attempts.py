"""SQL that ends attempts: each attempt's row and its run's new status written together, and the run waiting
behind a run that ended (overlap queue_one) released."""
from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Sequence

import psycopg
from aws_lambda_powertools import Logger

from tickwork.vocab import FINAL_STATUSES, RunStatus

logger = Logger(child=True)


@dataclass(frozen=True)
class AttemptRecord:
    number: int
    started_at: datetime
    duration_ms: int
    status_code: int | None
    response_body: str | None
    error: str | None


_PROMOTE_WAITING = """
UPDATE executions SET status = 'queued'
 WHERE id = (SELECT w.id FROM executions w
              WHERE w.job_id = (SELECT job_id FROM executions WHERE id = %s) AND w.status = 'waiting'
              ORDER BY w.scheduled_for LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING id::text
"""


# The same per-job lock as tickwork.store.executions.start_guarded: a run being parked `waiting` right now is
# seen, not stranded.
_LOCK_JOB_OF = """
SELECT pg_advisory_xact_lock(hashtextextended(e.job_id::text, 0))
  FROM executions e JOIN jobs j ON j.id = e.job_id WHERE e.id = %s AND j.overlap <> 'allow'
"""


def promote_waiting(conn: Any, finished_execution_id: str) -> str | None:
    """A run ended: the run waiting behind it (overlap queue_one), if any, becomes queued.

    Call inside the transaction that ended the run, so the lock covers both."""
    conn.execute(_LOCK_JOB_OF, (finished_execution_id,))
    row = conn.execute(_PROMOTE_WAITING, (finished_execution_id,)).fetchone()
    return None if row is None else row[0]


# One statement: each run's new status and its attempt row, or neither if the run is no longer ours.
# The attempt row is built from the very input row that updated the run (RETURNING r.*), so a run listed
# twice still gets at most one status and one attempt row.
_FINISH = """
WITH ended AS (
    UPDATE executions e
       SET status = r.status, next_attempt_at = r.next_attempt_at, last_error = r.error,
           finished_at = CASE WHEN r.status IN ('succeeded', 'failed', 'lost') THEN now() END
      FROM unnest(%(ids)s::uuid[], %(statuses)s::text[], %(nexts)s::timestamptz[], %(numbers)s::int[],
                  %(started)s::timestamptz[], %(durations)s::int[], %(codes)s::int[], %(bodies)s::text[],
                  %(errors)s::text[])
        AS r(id, status, next_attempt_at, number, started_at, duration_ms, status_code, response_body, error)
     WHERE e.id = r.id AND e.status = 'running' AND e.attempt_count = r.number
 RETURNING r.*
), recorded AS (
    INSERT INTO attempts (execution_id, number, started_at, duration_ms, status_code, response_body, error)
    SELECT id, number, started_at, duration_ms, status_code, response_body, error FROM ended
    ON CONFLICT DO NOTHING
)
SELECT id::text FROM ended
"""


# What the database answers when it refuses the values of a row (not when it cannot be reached).
_REFUSED_ROW = (psycopg.DataError, psycopg.IntegrityError)
UNSTORED_NOTE = "response not stored: the database refused it"

@dataclass(frozen=True)
class Finished:
    """An attempt to write: its run, its record, the run's new status and when its next attempt is due."""

    execution_id: str
    attempt: AttemptRecord
    status: RunStatus
    next_attempt_at: datetime | None = None


@dataclass(frozen=True)
class Ended:
    """Whether the run was still ours (False if it was taken from us, e.g. marked lost), and the id of a waiting
    run its end released, which the caller must dispatch."""

    ours: bool
    released: str | None = None


def finish_attempt(conn: Any, result: Finished, may_release: bool = True) -> Ended:
    """Store the attempt and the execution's new status atomically. `may_release=False` (a job that allows
    overlap, so nothing ever waits behind it) skips the release: one statement in all.

    An attempt the database refuses (a value it cannot hold) is stored without its response body, with
    UNSTORED_NOTE in its error: the run still ends, with the status it earned.
    """
    try:
        return _finish_one(conn, result, may_release)
    except _REFUSED_ROW as exc:
        # The exception's text may quote the row (the response): only its kind is logged.
        logger.warning("attempt stored without its response", extra={
            "execution_id": result.execution_id, "attempt": result.attempt.number, "reason": type(exc).__name__})
        return _finish_one(conn, replace(result, attempt=_without_response(result.attempt)), may_release)


def finish_attempts(conn: Any, results: Sequence[Finished]) -> set[str]:
    """finish_attempt(..., may_release=False) for many in one statement; returns the ids of the runs that were
    still ours, whose attempt was recorded.

    Only for runs whose end cannot release a waiting run (overlap allow, or a status that is not final):
    this never promotes one. Callers list a run once (an executor records one attempt per run per group);
    a run listed twice would end once, by either entry. Call outside a transaction: a batch the database
    refuses is written run by run, so one unwritable row costs at most its own response body.
    """
    try:
        return _finish(conn, results)
    except _REFUSED_ROW:
        return {r.execution_id for r in results if finish_attempt(conn, r, may_release=False).ours}


def _finish_one(conn: Any, result: Finished, may_release: bool) -> Ended:
    if not (may_release and result.status in FINAL_STATUSES):
        return Ended(bool(_finish(conn, [result])))
    with conn.transaction():
        if not _finish(conn, [result]):
            return Ended(False)
        return Ended(True, promote_waiting(conn, result.execution_id))


def _finish(conn: Any, results: Sequence[Finished]) -> set[str]:
    if not results:
        return set()
    params = {
        "ids": [r.execution_id for r in results], "statuses": [r.status for r in results],
        "nexts": [r.next_attempt_at for r in results], "numbers": [r.attempt.number for r in results],
        "started": [r.attempt.started_at for r in results], "durations": [r.attempt.duration_ms for r in results],
        "codes": [r.attempt.status_code for r in results], "bodies": [r.attempt.response_body for r in results],
        "errors": [r.attempt.error for r in results],
    }
    return {row[0] for row in conn.execute(_FINISH, params).fetchall()}


def _without_response(attempt: AttemptRecord) -> AttemptRecord:
    error = UNSTORED_NOTE if attempt.error is None else f"{attempt.error}; {UNSTORED_NOTE}"
    return replace(attempt, response_body=None, error=error)
