"""SQL over executions and attempts: the database barrier that makes every slot run at most once."""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any


from tickwork.models import StartedExecution

# A claim is recorded only if the job is still active, still at the version whose schedule produced
# it, and not already past the claimed slot; the same statement advances next_run_at (so Postgres can
# rebuild Redis) and inserts the claim's rows: the run to fire and/or one `missed` row for a gap.
_RECORD_CLAIMS = """
WITH claimed AS (
    SELECT * FROM unnest(%(job_ids)s::uuid[], %(claimed)s::timestamptz[], %(nexts)s::timestamptz[],
                         %(versions)s::int[])
        AS c(job_id, claimed_slot, next_run_at, version)
), advanced AS (
    UPDATE jobs j
       SET next_run_at = c.next_run_at,
           status = CASE WHEN c.next_run_at IS NULL THEN 'completed' ELSE j.status END
      FROM claimed c
     WHERE j.id = c.job_id AND j.status = 'active' AND j.version = c.version
       AND (j.next_run_at IS NULL OR date_trunc('milliseconds', j.next_run_at) <= c.claimed_slot)
 RETURNING j.id, j.tenant_id
), runs AS (
    SELECT * FROM unnest(%(run_ids)s::uuid[], %(run_jobs)s::uuid[], %(run_slots)s::timestamptz[],
                         %(run_statuses)s::text[], %(run_missed)s::int[], %(run_notes)s::text[])
        AS r(id, job_id, scheduled_for, status, missed_count, note)
)
INSERT INTO executions (id, tenant_id, job_id, scheduled_for, trigger, status, missed_count, last_error, finished_at)
SELECT r.id, a.tenant_id, r.job_id, r.scheduled_for, 'schedule', r.status, r.missed_count, r.note,
       CASE WHEN r.status = 'missed' THEN now() END
  FROM runs r JOIN advanced a ON a.id = r.job_id
ON CONFLICT (job_id, scheduled_for) DO NOTHING
RETURNING id::text, job_id::text, scheduled_for, status
"""


@dataclass(frozen=True)
class Slot:
    """One won claim: the job moves from `claimed` to `next_run_at`, running `fire` (if any) now.

    When catch-up skipped slots, `missed_count` > 0 and one `missed` row at `claimed` stands for them.
    """

    job_id: str
    claimed: datetime
    next_run_at: datetime | None
    version: int
    fire: datetime | None
    missed_count: int = 0
    missed_note: str | None = None

    def rows(self) -> list[tuple[str, datetime, str, int | None, str | None]]:
        """(id, scheduled_for, status, missed_count, note) of each execution row this claim creates."""
        rows: list[tuple[str, datetime, str, int | None, str | None]] = []
        if self.missed_count:
            rows.append((str(uuid.uuid4()), self.claimed, "missed", self.missed_count, self.missed_note))
        if self.fire is not None:
            rows.append((str(uuid.uuid4()), self.fire, "queued", None, None))
        return rows


def record_claims(conn: Any, slots: list[Slot]) -> list[tuple[str, str, datetime]]:
    """Record won claims in one statement; returns (execution_id, job_id, slot) of the runs to dispatch.

    Only the caller that gets a row back may dispatch it.
    """
    if not slots:
        return []
    rows = [(job_row, s.job_id) for s in slots for job_row in s.rows()]
    params = {
        "job_ids": [s.job_id for s in slots],
        "claimed": [s.claimed for s in slots],
        "nexts": [s.next_run_at for s in slots],
        "versions": [s.version for s in slots],
        "run_ids": [r[0] for r, _ in rows],
        "run_jobs": [job_id for _, job_id in rows],
        "run_slots": [r[1] for r, _ in rows],
        "run_statuses": [r[2] for r, _ in rows],
        "run_missed": [r[3] for r, _ in rows],
        "run_notes": [r[4] for r, _ in rows],
    }
    inserted = conn.execute(_RECORD_CLAIMS, params).fetchall()
    return [(r[0], r[1], r[2]) for r in inserted if r[3] == "queued"]


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
