"""SQL of the quarantine (tickwork.dispatch.quarantine): a job's error state, written when the handling of its
due-index entry raises, read by the operator's release. Recording a slot of the job clears it
(tickwork.store.executions), as does any change to the job (tickwork.store.jobs.update_job writes it back)."""
from __future__ import annotations

from datetime import datetime
from typing import Any, Sequence

from tickwork.models import Job
from tickwork.store.jobs import JOB_COLUMNS, read_jobs

# The failure count goes up by one and the retry is now + the backoff of that count (`steps`, from
# tickwork.rules.quarantine.backoff_steps: the rule itself stays in one place). An active job only: one paused
# or deleted meanwhile is out of the index anyway. The streak's start (errored_at) is kept.
_SET_ASIDE = """
UPDATE jobs j
   SET error_reason = f.reason, errored_at = coalesce(j.errored_at, %(now)s),
       error_count = coalesce(j.error_count, 0) + 1,
       retry_errored_at = %(now)s + (%(steps)s::bigint[])[least(coalesce(j.error_count, 0) + 1, %(last)s)]
                                    * interval '1 millisecond'
  FROM unnest(%(ids)s::uuid[], %(reasons)s::text[]) AS f(id, reason)
 WHERE j.id = f.id AND j.status = 'active'
RETURNING j.id::text, j.error_count, j.tenant_id::text
"""
# Jobs an operator's release may clear, at most this many per call (the answer says when more are left).
MAX_RELEASED = 1000


def set_aside(conn: Any, reasons: dict[str, str], now: datetime, steps: Sequence[int]) -> dict[str, tuple[int, str]]:
    """Put these jobs (id -> reason) in quarantine; returns, of those active, each one's failures in a row and
    its tenant."""
    if not reasons:
        return {}
    rows = conn.execute(_SET_ASIDE, {"ids": list(reasons), "reasons": list(reasons.values()), "now": now,
                                     "steps": list(steps), "last": len(steps)}).fetchall()
    return {row[0]: (int(row[1]), row[2]) for row in rows}


def in_quarantine(conn: Any, tenant_id: str | None, job_id: str | None) -> list[Job]:
    """The active jobs in quarantine of a tenant, or the one job (of any tenant), oldest first and at most
    MAX_RELEASED + 1 (one more tells that more are left); their rows held until the transaction ends."""
    where = "id = %(job)s" if job_id is not None else "tenant_id = %(tenant)s"
    return read_jobs(conn, f"SELECT {JOB_COLUMNS} FROM jobs WHERE {where} AND status = 'active'"
                     " AND (error_reason IS NOT NULL OR retry_errored_at IS NOT NULL)"
                     " ORDER BY created_at, id LIMIT %(limit)s FOR UPDATE",
                     {"job": job_id, "tenant": tenant_id, "limit": MAX_RELEASED + 1})
