"""SQL of completion callbacks (tickwork.rules.completion): a run's token, its wait for the callback, the
callback itself and settling the wait. Every write is conditional on the run's status and attempt, so a
late, repeated or forged call changes nothing."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Sequence

from tickwork.rules.completion import AWAITING, Awaiting, timeout_seconds

# The token of the attempt being sent: only while that attempt is the running one.
_ARM = """
UPDATE executions SET callback_token_hash = %(hash)s, callback_attempt = %(attempt)s
 WHERE id = %(id)s AND status = 'running' AND attempt_count = %(attempt)s
"""

# The target accepted the attempt: the run awaits its completion, the attempt is recorded as answered. A
# completion already in for this attempt (the callback beat this write) is returned, to settle it at once.
_AWAIT = """
WITH awaiting AS (
    UPDATE executions e
       SET status = 'awaiting_completion', completion_deadline = r.deadline, next_attempt_at = NULL,
           last_error = NULL
      FROM unnest(%(ids)s::uuid[], %(numbers)s::int[], %(deadlines)s::timestamptz[], %(started)s::timestamptz[],
                  %(durations)s::int[], %(codes)s::int[], %(bodies)s::text[])
        AS r(id, number, deadline, started_at, duration_ms, status_code, response_body)
     WHERE e.id = r.id AND e.status = 'running' AND e.attempt_count = r.number
 RETURNING r.*, e.completion_attempt IS NOT DISTINCT FROM r.number AS reported
), recorded AS (
    INSERT INTO attempts (execution_id, number, started_at, duration_ms, status_code, response_body)
    SELECT id, number, started_at, duration_ms, status_code, response_body FROM awaiting
    ON CONFLICT DO NOTHING
)
SELECT id::text, reported FROM awaiting
"""

# A callback: kept once per attempt, for the attempt whose token it carries, while that attempt is running
# (its answer not recorded yet) or awaiting. Returns the run's status then.
_REPORT = """
UPDATE executions SET completion_status = %(status)s, completion_output = %(output)s, completion_attempt = %(attempt)s
 WHERE id = %(id)s AND callback_attempt = %(attempt)s AND attempt_count = %(attempt)s
   AND callback_token_hash = %(hash)s AND status IN ('running', 'awaiting_completion')
   AND completion_attempt IS DISTINCT FROM %(attempt)s
RETURNING status
"""
_TOKEN_OF = """
SELECT 1 FROM executions WHERE id = %(id)s AND callback_attempt = %(attempt)s AND callback_token_hash = %(hash)s
"""

_LOCK_AWAITING = """
SELECT e.id::text, e.attempt_count, e.completion_deadline, j.completion,
       CASE WHEN e.completion_attempt = e.attempt_count THEN e.completion_status END,
       CASE WHEN e.completion_attempt = e.attempt_count THEN e.completion_output END,
       a.started_at, a.duration_ms, a.status_code
  FROM executions e JOIN jobs j ON j.id = e.job_id
  JOIN attempts a ON a.execution_id = e.id AND a.number = e.attempt_count
 WHERE e.id = %(id)s AND e.status = 'awaiting_completion' AND e.attempt_count = %(attempt)s
   FOR UPDATE OF e
"""

# Runs whose wait is over (or whose completion came in) that the due index did not settle: its check was
# lost with Redis, or the executor stopped before queueing it. Along executions_awaiting_completion.
_OVERDUE = """
SELECT id::text, attempt_count FROM executions
 WHERE status = 'awaiting_completion'
   AND (completion_deadline < %(before)s OR completion_attempt = attempt_count)
 ORDER BY completion_deadline LIMIT %(limit)s
"""


@dataclass(frozen=True)
class Answered:
    """An accepted answer of a callback-mode attempt, to record as awaiting its completion."""

    execution_id: str
    number: int
    deadline: datetime
    started_at: datetime
    duration_ms: int
    status_code: int | None
    response_body: str | None


def arm(conn: Any, execution_id: str, attempt: int, token_hash: bytes) -> bool:
    """Store the token's hash for the attempt about to be sent; False if the attempt is no longer running."""
    return conn.execute(_ARM, {"id": execution_id, "attempt": attempt, "hash": token_hash}).rowcount == 1


def await_completion(conn: Any, answered: Sequence[Answered]) -> dict[str, bool]:
    """Record the answers and move their runs to awaiting_completion; returns, for each run still ours,
    whether a completion for the attempt is already in (to settle at once)."""
    if not answered:
        return {}
    rows = conn.execute(_AWAIT, {
        "ids": [a.execution_id for a in answered], "numbers": [a.number for a in answered],
        "deadlines": [a.deadline for a in answered], "started": [a.started_at for a in answered],
        "durations": [a.duration_ms for a in answered], "codes": [a.status_code for a in answered],
        "bodies": [a.response_body for a in answered],
    }).fetchall()
    return {row[0]: bool(row[1]) for row in rows}


def report(conn: Any, execution_id: str, attempt: int, token_hash: bytes, status: str,
           output: str | None) -> str | None:
    """Keep a callback's completion; returns the run's status ('running' or 'awaiting_completion'), or None
    when nothing was kept (see `knows_token` for why)."""
    row = conn.execute(_REPORT, {"id": execution_id, "attempt": attempt, "hash": token_hash, "status": status,
                                 "output": output}).fetchone()
    return None if row is None else str(row[0])


def knows_token(conn: Any, execution_id: str, attempt: int, token_hash: bytes) -> bool:
    """Whether the token is the one of that run's attempt (then a refused report came too late or twice)."""
    return conn.execute(_TOKEN_OF, {"id": execution_id, "attempt": attempt, "hash": token_hash}).fetchone() is not None


def lock_awaiting(conn: Any, execution_id: str, attempt: int) -> Awaiting | None:
    """The run while it awaits the completion of `attempt`, its row locked (call in a transaction), with the
    attempt's answer as recorded."""
    row = conn.execute(_LOCK_AWAITING, {"id": execution_id, "attempt": attempt}).fetchone()
    if row is None:
        return None
    run_id, number, deadline, completion, reported, output, started_at, duration_ms, status_code = row
    return Awaiting(run_id, number, deadline, timeout_seconds(completion), reported, output, started_at, duration_ms,
                    status_code)


def reopen(conn: Any, execution_id: str, attempt: int, error: str | None, output: str | None) -> None:
    """The locked awaiting run back to `running`, within the settling transaction, so the ordinary end of an
    attempt (tickwork.runs.ending) writes its end; the attempt row, recorded with its answer already, gets its
    error and output."""
    conn.execute("UPDATE executions SET status = 'running' WHERE id = %s AND status = %s", (execution_id, AWAITING))
    conn.execute("UPDATE attempts SET error = %s, output = %s WHERE execution_id = %s AND number = %s",
                 (error, output, execution_id, attempt))


def overdue(conn: Any, before: datetime, limit: int) -> list[tuple[str, int]]:
    """(execution id, attempt) of runs awaiting past `before`, or whose completion came in."""
    return [(row[0], row[1]) for row in conn.execute(_OVERDUE, {"before": before, "limit": limit}).fetchall()]
