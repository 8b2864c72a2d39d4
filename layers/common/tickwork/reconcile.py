"""Rebuild the Redis due index from Postgres, the source of truth (after a failover, a flush, a restart)."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aws_lambda_powertools import Logger

from tickwork import scheduling
from tickwork.dueindex import DueIndex
from tickwork.errors import ScheduleError
from tickwork.store import jobs as jobs_store
from tickwork.timeutil import to_ms

logger = Logger(child=True)


@dataclass
class RebuildResult:
    indexed: int = 0
    removed: int = 0
    unparsable: int = 0


def rebuild_index(conn: Any, index: DueIndex, now: datetime) -> RebuildResult:
    """Make sure every active job is indexed and nothing else is.

    Jobs already in the set keep their score (the poller may have advanced it since Postgres was
    written); a job with no next_run_at gets its first future slot.
    """
    result = RebuildResult()
    for batch in jobs_store.iter_active_jobs(conn):
        pipe = index.pipeline()
        for job in batch:
            result.indexed += _index_one(index, job, now, pipe, result)
        pipe.execute()
    for job_ids in index.job_ids():
        active = {job.id for job in jobs_store.get_jobs(conn, job_ids) if job.status == "active"}
        for dead in set(job_ids) - active:
            index.remove_job(dead)
            result.removed += 1
    index.mark_built(to_ms(now))
    logger.info("due index rebuilt", extra=result.__dict__)
    return result


def _index_one(index: DueIndex, job: Any, now: datetime, pipe: Any, result: RebuildResult) -> int:
    try:
        schedule = scheduling.job_schedule(job)
    except ScheduleError:
        result.unparsable += 1
        logger.error("stored schedule no longer parses; job not indexed", extra={"job_id": job.id})
        return 0
    next_run_at = job.next_run_at or scheduling.first_slot(schedule, now)
    if next_run_at is None:
        return 0
    spec = scheduling.index_spec(schedule, job.version, job.catchup_window_seconds, job.catchup)
    index.put_job(job.id, spec, to_ms(next_run_at), pipeline=pipe, keep_score=True)
    return 1
