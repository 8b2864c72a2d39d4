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
        _index_jobs(conn, index, outdated, now, result)
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


def _index_jobs(conn: Any, index: DueIndex, job_ids: list[str], now: datetime, result: RebuildResult) -> None:
    if not job_ids:
        return
    pipe = index.pipeline()
    for job in jobs_store.get_jobs(conn, job_ids):
        if job.status == "active":  # it may have been paused since it was listed
            result.indexed += _index_one(index, job, now, pipe, result)
    pipe.execute()


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
