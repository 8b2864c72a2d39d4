"""Make the Redis due index match Postgres, the source of truth: rebuild it (after a failover, a flush, a
restart, and periodically), and undo claims that never reached Postgres."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aws_lambda_powertools import Logger

from tickwork import scheduling
from tickwork.dueindex import DueIndex
from tickwork.errors import ScheduleError
from tickwork.models import JobRow
from tickwork.store import jobs as jobs_store
from tickwork.store import maintenance as maintenance_store
from tickwork.timeutil import to_ms

logger = Logger(child=True)

# Jobs read from Postgres and compared with the index per round trip.
BATCH = 1000
# Rewinding looks only at jobs whose claim went astray (normally none); this bounds one run's work.
MAX_REWIND_BATCHES = 50


@dataclass
class RebuildResult:
    indexed: int = 0  # jobs written: missing from the index, or indexed with an outdated spec
    removed: int = 0
    unparsable: int = 0


def rebuild_index(conn: Any, index: DueIndex, now: datetime) -> RebuildResult:
    """Make sure every active job is indexed with its current spec, and nothing else is.

    Only what differs is written, so this is cheap enough to run every minute. Jobs already in the set
    keep their score (the poller may have advanced it since Postgres was written); a job with no
    next_run_at gets its first future slot.
    """
    result = RebuildResult()
    for page in maintenance_store.active_jobs(conn, BATCH):
        states = index.job_states([job.id for job in page])
        outdated = [job.id for job, state in zip(page, states) if _outdated(job, *state)]
        index_jobs(conn, index, outdated, now, result)
    for job_ids in index.job_ids(BATCH):
        for dead in set(job_ids) - maintenance_store.active_among(conn, job_ids):
            index.remove_job(dead)
            result.removed += 1
    index.mark_built(to_ms(now))
    if result.indexed or result.removed or result.unparsable:
        logger.info("due index brought in line with Postgres", extra=result.__dict__)
    return result


def _outdated(job: maintenance_store.ActiveJob, score: int | None, spec: dict[str, Any] | None) -> bool:
    """Missing, or indexed with another version or catch-up policy (an index write that failed).

    These are the parts of `scheduling.index_spec` that can change; the schedule only changes with the version.
    """
    if score is None or spec is None:
        return True
    return (spec.get("v"), spec.get("cw"), spec.get("ca")) != (job.version, job.catchup_window_seconds, job.catchup)


def index_jobs(conn: Any, index: DueIndex, job_ids: list[str], now: datetime,
               result: RebuildResult | None = None) -> RebuildResult:
    """Index these jobs as Postgres has them: active ones with their current spec (a score already in
    the set is kept), and the rest (paused, deleted, gone, or a stored schedule that no longer parses)
    taken out, so nothing unrunnable stays due."""
    result = result if result is not None else RebuildResult()
    if not job_ids:
        return result
    jobs = {job.id: job for job in jobs_store.get_jobs(conn, job_ids)}
    pipe = index.pipeline()
    for job_id in job_ids:
        job = jobs.get(job_id)
        if job is not None and job.status == "active" and _index_one(index, job, now, pipe, result):
            result.indexed += 1
        else:
            index.remove_job(job_id, pipe)
    pipe.execute()
    return result


def _index_one(index: DueIndex, job: JobRow, now: datetime, pipe: Any, result: RebuildResult) -> bool:
    try:
        schedule = scheduling.job_schedule(job)
    except ScheduleError:
        result.unparsable += 1
        logger.error("stored schedule no longer parses; job left out of the index", extra={"job_id": job.id})
        return False
    next_run_at = job.next_run_at or scheduling.first_slot(schedule, now)
    if next_run_at is None:
        return False
    index.put_job(job.id, scheduling.job_spec(job, schedule), to_ms(next_run_at), pipeline=pipe, keep_score=True)
    return True


def rewind_unrecorded_claims(conn: Any, index: DueIndex, before: datetime) -> int:
    """Undo claims that never reached Postgres: a poller died between the Redis claim and the insert.

    Such a job's next_run_at still names the claimed slot while its score has moved on; moving the score
    back makes the next tick record that slot (its catch-up policy decides run or missed). `before` must
    leave claims still in flight alone; rewinding one anyway is harmless, since Postgres refuses to
    record a slot twice. Returns how many jobs were moved back.
    """
    rewound = 0
    for page in maintenance_store.overdue_jobs(conn, before, BATCH, MAX_REWIND_BATCHES):
        rewound += index.rewind_jobs({job_id: to_ms(at) for job_id, at in page.items()})
    if rewound:
        logger.warning("rewound claims that never reached Postgres", extra={"jobs": rewound})
    return rewound
