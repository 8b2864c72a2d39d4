"""SQL over the jobs table."""
from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Any

from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from tickwork.models import JobRow
from tickwork.store.executions import stopped_note
from tickwork.store.filters import JobFilter, like_prefix

JOB_COLUMNS = (
    "id::text, tenant_id::text, name, schedule, timezone, start_at, end_at, request, retry, status,"
    " next_run_at, version, created_at, updated_at, overlap, catchup, catchup_window_seconds, tags, description,"
    " notify, pause_after_failures, paused_reason, success, key, source, spread_seconds, completion, calendar,"
    " error_reason, errored_at, error_count, retry_errored_at"
)


def get_jobs(conn: Any, job_ids: list[str]) -> list[JobRow]:
    """Jobs by id regardless of tenant: for the poller and reconciler, never for the API."""
    if not job_ids:
        return []
    with conn.cursor(row_factory=class_row(JobRow)) as cur:
        return cur.execute(f"SELECT {JOB_COLUMNS} FROM jobs WHERE id = ANY(%s::uuid[])", (job_ids,)).fetchall()


# ---------------------------------------------------------------- tenant-scoped CRUD for the API
# Every query below names the tenant: a job of another tenant is indistinguishable from a missing one.

_LIVE = "tenant_id = %(tenant_id)s AND status <> 'deleted'"
# The status the API shows (tickwork.rules.quarantine.shown_status): an active job in quarantine is `errored`.
_SHOWN_STATUS = "(CASE WHEN status = 'active' AND error_reason IS NOT NULL THEN 'errored' ELSE status END)"


def insert_job(conn: Any, job: JobRow) -> None:
    conn.execute(
        "INSERT INTO jobs (id, tenant_id, name, schedule, timezone, start_at, end_at, request, retry, status,"
        " next_run_at, version, created_at, updated_at, overlap, catchup, catchup_window_seconds, tags, description,"
        " notify, pause_after_failures, paused_reason, success, key, source, spread_seconds, completion, calendar)"
        " VALUES (%(id)s, %(tenant_id)s, %(name)s, %(schedule)s, %(timezone)s, %(start_at)s, %(end_at)s,"
        " %(request)s, %(retry)s, %(status)s, %(next_run_at)s, %(version)s, %(created_at)s, %(updated_at)s,"
        " %(overlap)s, %(catchup)s, %(catchup_window_seconds)s, %(tags)s, %(description)s,"
        " %(notify)s, %(pause_after_failures)s, %(paused_reason)s, %(success)s, %(key)s, %(source)s, %(spread_seconds)s, %(completion)s,"
        " %(calendar)s)",
        _params(job),
    )


def get_job(conn: Any, tenant_id: str, job_id: str, *, lock: bool = False) -> JobRow | None:
    """The tenant's job unless deleted; `lock` holds its row until the caller's transaction ends."""
    sql = f"SELECT {JOB_COLUMNS} FROM jobs WHERE id = %(id)s AND {_LIVE}" + (" FOR UPDATE" if lock else "")
    with conn.cursor(row_factory=class_row(JobRow)) as cur:
        return cur.execute(sql, {"id": job_id, "tenant_id": tenant_id}).fetchone()


def get_job_by_key(conn: Any, tenant_id: str, key: str, *, lock: bool = False) -> JobRow | None:
    """The tenant's live job with this key (jobs_tenant_key); `lock` as in get_job."""
    sql = f"SELECT {JOB_COLUMNS} FROM jobs WHERE key = %(key)s AND {_LIVE}" + (" FOR UPDATE" if lock else "")
    with conn.cursor(row_factory=class_row(JobRow)) as cur:
        return cur.execute(sql, {"key": key, "tenant_id": tenant_id}).fetchone()


def list_jobs(
    conn: Any, tenant_id: str, limit: int, before: tuple[datetime, str] | None, filters: JobFilter = JobFilter(),
) -> list[JobRow]:
    """Newest first; `before` is the (created_at, id) of the last job already seen (keyset pagination)."""
    where, params = _filtered(filters)
    where += " AND (created_at, id) < (%(created_at)s, %(id)s::uuid)" if before else ""
    params.update(tenant_id=tenant_id, limit=limit)
    if before:
        params.update(created_at=before[0], id=before[1])
    with conn.cursor(row_factory=class_row(JobRow)) as cur:
        return cur.execute(
            f"SELECT {JOB_COLUMNS} FROM jobs WHERE {where} ORDER BY created_at DESC, id DESC LIMIT %(limit)s", params
        ).fetchall()


def update_job(conn: Any, job: JobRow) -> bool:
    """Write every mutable column of `job`; False if it no longer exists for its tenant."""
    return conn.execute(
        "UPDATE jobs SET name = %(name)s, schedule = %(schedule)s, timezone = %(timezone)s, start_at = %(start_at)s,"
        " end_at = %(end_at)s, request = %(request)s, retry = %(retry)s, status = %(status)s,"
        " next_run_at = %(next_run_at)s, version = %(version)s, updated_at = %(updated_at)s,"
        " overlap = %(overlap)s, catchup = %(catchup)s, catchup_window_seconds = %(catchup_window_seconds)s,"
        " tags = %(tags)s, description = %(description)s,"
        " notify = %(notify)s, pause_after_failures = %(pause_after_failures)s, paused_reason = %(paused_reason)s,"
        " success = %(success)s, key = %(key)s, source = %(source)s,"
        " spread_seconds = %(spread_seconds)s, completion = %(completion)s,"
        " calendar = %(calendar)s,"
        " error_reason = %(error_reason)s, errored_at = %(errored_at)s, error_count = %(error_count)s,"
        " retry_errored_at = %(retry_errored_at)s,"
        # A paused job that runs again starts counting its failures afresh (tickwork.rules.notifications).
        " consecutive_failures = CASE WHEN status = 'paused' AND %(status)s <> 'paused' THEN 0"
        " ELSE consecutive_failures END"
        f" WHERE id = %(id)s AND {_LIVE}",
        _params(job),
    ).rowcount == 1


def delete_job(conn: Any, tenant_id: str, job_id: str, at: datetime) -> str | None:
    """Soft delete: the row stays for its executions' sake; runs not started yet are skipped with the
    reason (a run in flight finishes its attempt, and is not retried). Returns the job's name; None if there
    was nothing to delete."""
    row = conn.execute(
        "WITH deleted AS ("
        " UPDATE jobs SET status = 'deleted', deleted_at = %(at)s, updated_at = %(at)s, next_run_at = NULL"
        f" WHERE id = %(id)s AND {_LIVE} RETURNING id, name"
        "), cancelled AS ("
        " UPDATE executions SET status = 'skipped', last_error = %(note)s,"
        " next_attempt_at = NULL, finished_at = %(at)s"
        " WHERE job_id IN (SELECT id FROM deleted) AND status IN ('queued', 'waiting', 'retrying'))"
        " SELECT name FROM deleted",
        {"id": job_id, "tenant_id": tenant_id, "at": at, "note": stopped_note("deleted")},
    ).fetchone()
    return None if row is None else str(row[0])


def _filtered(filters: JobFilter) -> tuple[str, dict[str, Any]]:
    """The WHERE clause of a filtered list (jobs_tags and jobs_tenant_name serve it) and its parameters."""
    where, params = _LIVE, {}
    if filters.statuses:
        where += f" AND {_SHOWN_STATUS} = ANY(%(statuses)s::text[])"
        params["statuses"] = list(filters.statuses)
    if filters.tags:
        where += " AND tags @> %(tags)s::text[]"
        params["tags"] = list(filters.tags)
    if filters.key is not None:
        where += " AND key = %(key)s"
        params["key"] = filters.key
    if filters.source is not None:
        where += " AND source = %(source)s"
        params["source"] = filters.source
    if filters.name_prefix:
        where += " AND name LIKE %(name_like)s"
        params["name_like"] = like_prefix(filters.name_prefix)
    return where, params


def _params(job: JobRow) -> dict[str, Any]:
    optional = {name: None if getattr(job, name) is None else Jsonb(getattr(job, name)) for name in ("notify", "success",
                                                                                          "completion", "calendar")}
    return {**asdict(job), "request": Jsonb(job.request), "retry": Jsonb(job.retry), **optional}
