"""SQL over executions and attempts: the database barrier that makes every slot run at most once."""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any


from tickwork.models import StartedExecution

# A slot is inserted only if the job is still active, still at the version whose schedule produced the
# slot, and not already past it; the same statement advances next_run_at so Postgres can rebuild Redis.
_RECORD_SLOTS = """
WITH batch AS (
    SELECT * FROM unnest(%(job_ids)s::uuid[], %(slots)s::timestamptz[], %(nexts)s::timestamptz[],
                         %(versions)s::int[], %(execution_ids)s::uuid[])
        AS b(job_id, scheduled_for, next_run_at, version, execution_id)
), advanced AS (
    UPDATE jobs j
       SET next_run_at = b.next_run_at,
           status = CASE WHEN b.next_run_at IS NULL THEN 'completed' ELSE j.status END
      FROM batch b
     WHERE j.id = b.job_id AND j.status = 'active' AND j.version = b.version
       AND (j.next_run_at IS NULL OR date_trunc('milliseconds', j.next_run_at) <= b.scheduled_for)
 RETURNING j.id, j.tenant_id
)
INSERT INTO executions (id, tenant_id, job_id, scheduled_for, trigger, status)
SELECT b.execution_id, a.tenant_id, b.job_id, b.scheduled_for, 'schedule', 'queued'
  FROM batch b JOIN advanced a ON a.id = b.job_id
ON CONFLICT (job_id, scheduled_for) DO NOTHING
RETURNING id::text, job_id::text, scheduled_for
"""


@dataclass(frozen=True)
class Slot:
    job_id: str
    scheduled_for: datetime
    next_run_at: datetime | None
    version: int


def record_slots(conn: Any, slots: list[Slot]) -> list[tuple[str, str, datetime]]:
    """Insert one queued execution per slot in one statement; returns (execution_id, job_id, slot) inserted.

    Only the caller that gets a row back may dispatch it.
    """
    if not slots:
        return []
    params = {
        "job_ids": [s.job_id for s in slots],
        "slots": [s.scheduled_for for s in slots],
        "nexts": [s.next_run_at for s in slots],
        "versions": [s.version for s in slots],
        "execution_ids": [str(uuid.uuid4()) for _ in slots],
    }
    return [(r[0], r[1], r[2]) for r in conn.execute(_RECORD_SLOTS, params).fetchall()]


def insert_manual(conn: Any, tenant_id: str, job_id: str, at: datetime) -> str:
    execution_id = str(uuid.uuid4())
    conn.execute(
        "INSERT INTO executions (id, tenant_id, job_id, scheduled_for, trigger, status)"
        " VALUES (%s, %s, %s, %s, 'manual', 'queued')",
        (execution_id, tenant_id, job_id, at),
    )
    return execution_id


_START = """
UPDATE executions e
   SET status = 'running', attempt_count = e.attempt_count + 1,
       started_at = coalesce(e.started_at, now()), next_attempt_at = NULL
  FROM jobs j
 WHERE e.id = %(id)s AND j.id = e.job_id
   AND e.status IN ('queued', 'retrying') AND e.attempt_count = %(attempt)s - 1
RETURNING e.id::text, e.job_id::text, e.tenant_id::text, e.scheduled_for, e.attempt_count, j.request, j.retry
"""


def start_attempt(conn: Any, execution_id: str, attempt: int) -> StartedExecution | None:
    """Conditionally move the execution to running; None means another delivery already did (or it is over)."""
    row = conn.execute(_START, {"id": execution_id, "attempt": attempt}).fetchone()
    return None if row is None else StartedExecution(*row)


@dataclass(frozen=True)
class AttemptRecord:
    number: int
    started_at: datetime
    duration_ms: int
    status_code: int | None
    response_body: str | None
    error: str | None


def finish_attempt(
    conn: Any, execution_id: str, attempt: AttemptRecord, status: str, next_attempt_at: datetime | None
) -> bool:
    """Store the attempt and the execution's new status atomically; False if the run was taken from us."""
    with conn.transaction():
        updated = conn.execute(
            "UPDATE executions SET status = %s, next_attempt_at = %s, last_error = %s,"
            " finished_at = CASE WHEN %s IN ('succeeded', 'failed') THEN now() END"
            " WHERE id = %s AND status = 'running' AND attempt_count = %s",
            (status, next_attempt_at, attempt.error, status, execution_id, attempt.number),
        ).rowcount
        if not updated:
            return False
        conn.execute(
            "INSERT INTO attempts (execution_id, number, started_at, duration_ms, status_code, response_body, error)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            (execution_id, attempt.number, attempt.started_at, attempt.duration_ms,
             attempt.status_code, attempt.response_body, attempt.error),
        )
    return True
