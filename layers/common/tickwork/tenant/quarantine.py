"""An operator's release of jobs from quarantine (tickwork.dispatch.quarantine; the action is
tickwork.tenant.operator's `release-quarantine`): one job, or every job of a tenant in quarantine, cleared and back
at its first slot from now, its calendars applied. A change to the job through the API releases it too
(tickwork.tenant.jobs), as does a change to a calendar it names (tickwork.tenant.calendars)."""
from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from aws_lambda_powertools import Logger

from tickwork.dueindex.index import DueIndex
from tickwork.models import Job
from tickwork.rules.quarantine import released
from tickwork.dueindex import specs as dueindex_specs
from tickwork.store import jobs as jobs_store
from tickwork.store import quarantine as store
from tickwork.tenant import calendars

logger = Logger(child=True)


@dataclass(frozen=True)
class Released:
    job_ids: list[str]
    more: bool  # the tenant has more jobs in quarantine than one call releases (store.quarantine.MAX_RELEASED)


def release(pool: Any, index: DueIndex, now: datetime, *, tenant_id: str | None = None,
            job_id: str | None = None) -> Released:
    """Release the job `job_id` (of any tenant), or every job of `tenant_id` in quarantine."""
    with pool.connection() as conn, conn.transaction():
        found = store.in_quarantine(conn, tenant_id, job_id)
        freed = [_freed(conn, job, now) for job in found[:store.MAX_RELEASED]]
        for job in freed:
            jobs_store.update_job(conn, job)
    for job in freed:
        dueindex_specs.index_job(index, job)
        logger.info("job released from quarantine by an operator", extra={
            "job_id": job.id, "tenant_id": job.tenant_id, "next_run_at": job.next_run_at})
    return Released([job.id for job in freed], len(found) > store.MAX_RELEASED)


def _freed(conn: Any, job: Job, now: datetime) -> Job:
    """The job released, at its next slot as its calendars have it; at its bare schedule's when they still
    cannot be applied (the poller sets it aside again if they still raise there: one job, not the release)."""
    cleared = released(job, now)
    try:
        aimed = calendars.aimed(cleared, calendars.job_calendars(conn, job.tenant_id, job.calendar), now)
    except Exception as error:  # noqa: BLE001 - this job's calendars; the others are released all the same
        logger.warning("a released job's calendars could not be applied; it goes back at its schedule's next slot",
                       extra={"job_id": job.id, "tenant_id": job.tenant_id, "error": type(error).__name__})
        aimed = cleared
    return replace(aimed, updated_at=now)
