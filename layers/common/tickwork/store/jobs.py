"""SQL over the jobs table."""
from __future__ import annotations

import math
from datetime import datetime
from typing import Any, Mapping

from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from tickwork import defaults
from tickwork.models import JOB_FIELDS, JOB_PARTS, Job, parsed_parts, part_json
from tickwork.store.executions import stopped_note
from tickwork.store.filters import JobFilter, like_prefix

# Every column of a job, named once (tickwork.models.JOB_FIELDS): the reads, the insert and the update follow.
_UUIDS = ("id", "tenant_id")
JOB_COLUMNS = ", ".join(f"{name}::text AS {name}" if name in _UUIDS else name for name in JOB_FIELDS)
_INSERT = (f"INSERT INTO jobs ({', '.join(JOB_FIELDS)})"
           f" VALUES ({', '.join(f'%({name})s' for name in JOB_FIELDS)})")
# What an update writes: all but the job's identity and creation.
_UPDATED = tuple(name for name in JOB_FIELDS if name not in (*_UUIDS, "created_at"))
# What an AWS target's job holds in `request` (NOT NULL, and read by the release before `target`: migration 0025): an
# HTTP request to a reserved name that resolves nowhere, with the target's timeout (the sweeper waits as long).
TARGET_STAND_IN: dict[str, Any] = {"method": "POST", "url": "https://aws-target.invalid/", "headers": {}, "body": None}


def job_from_row(row: Mapping[str, Any]) -> Job:
    """A job read as JOB_COLUMNS: its JSON columns parsed into their parts, once (a target's job has no request)."""
    return Job(**parsed_parts({**row, "request": None} if row.get("target") is not None else row))


def read_jobs(conn: Any, sql: str, params: Any) -> list[Job]:
    """The jobs a query selecting JOB_COLUMNS finds."""
    with conn.cursor(row_factory=dict_row) as cur:
        return [job_from_row(row) for row in cur.execute(sql, params).fetchall()]


def get_jobs(conn: Any, job_ids: list[str]) -> list[Job]:
    """Jobs by id regardless of tenant: for the poller and reconciler, never for the API."""
    if not job_ids:
        return []
    return read_jobs(conn, f"SELECT {JOB_COLUMNS} FROM jobs WHERE id = ANY(%s::uuid[])", (job_ids,))


# ---------------------------------------------------------------- tenant-scoped CRUD for the API
# Every query below names the tenant: a job of another tenant is indistinguishable from a missing one.

_LIVE = "tenant_id = %(tenant_id)s AND status <> 'deleted'"
# The status the API shows (tickwork.rules.quarantine.shown_status): an active job in quarantine is `errored`.
_SHOWN_STATUS = "(CASE WHEN status = 'active' AND error_reason IS NOT NULL THEN 'errored' ELSE status END)"


def insert_job(conn: Any, job: Job) -> None:
    conn.execute(_INSERT, _params(job))


def get_job(conn: Any, tenant_id: str, job_id: str, *, lock: bool = False) -> Job | None:
    """The tenant's job unless deleted; `lock` holds its row until the caller's transaction ends."""
    sql = f"SELECT {JOB_COLUMNS} FROM jobs WHERE id = %(id)s AND {_LIVE}" + (" FOR UPDATE" if lock else "")
    return next(iter(read_jobs(conn, sql, {"id": job_id, "tenant_id": tenant_id})), None)


def get_job_by_key(conn: Any, tenant_id: str, key: str, *, lock: bool = False) -> Job | None:
    """The tenant's live job with this key (jobs_tenant_key); `lock` as in get_job."""
    sql = f"SELECT {JOB_COLUMNS} FROM jobs WHERE key = %(key)s AND {_LIVE}" + (" FOR UPDATE" if lock else "")
    return next(iter(read_jobs(conn, sql, {"key": key, "tenant_id": tenant_id})), None)


def list_jobs(
    conn: Any, tenant_id: str, limit: int, before: tuple[datetime, str] | None, filters: JobFilter = JobFilter(),
) -> list[Job]:
    """Newest first; `before` is the (created_at, id) of the last job already seen (keyset pagination)."""
    where, params = _filtered(filters)
    where += " AND (created_at, id) < (%(created_at)s, %(id)s::uuid)" if before else ""
    params.update(tenant_id=tenant_id, limit=limit)
    if before:
        params.update(created_at=before[0], id=before[1])
    return read_jobs(conn, f"SELECT {JOB_COLUMNS} FROM jobs WHERE {where} ORDER BY created_at DESC, id DESC LIMIT %(limit)s",
                 params)


def update_job(conn: Any, job: Job) -> bool:
    """Write every mutable column of `job`; False if it no longer exists for its tenant."""
    return conn.execute(
        "UPDATE jobs SET " + ", ".join(f"{name} = %({name})s" for name in _UPDATED) + ","
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
    where = _LIVE
    params: dict[str, Any] = {}
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


def _params(job: Job) -> dict[str, Any]:
    params = {name: _column(part_json(getattr(job, name))) if name in JOB_PARTS else part_json(getattr(job, name))
              for name in JOB_FIELDS}
    if job.target is not None:
        timeout = math.ceil(job.target.timeout_seconds or defaults.REQUEST_TIMEOUT_SECONDS)
        params["request"] = Jsonb({**TARGET_STAND_IN, "timeout_seconds": timeout})
    return params


def _column(value: Any) -> Any:
    return None if value is None else Jsonb(value)
