"""Read queries over executions and attempts, for the API: every one scoped to a tenant."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.rows import class_row

from tickwork.store.filters import ExecutionFilter

# Enough of a response body to recognise an error page; the full stored text stays in the table.
RESPONSE_PREVIEW_CHARS = 1024

_EXECUTION_COLUMNS = (
    "id::text, job_id::text, scheduled_for, trigger, status, attempt_count, next_attempt_at, created_at,"
    " started_at, finished_at, last_error, missed_count, replay_count, replayed_at, completion_deadline"
)


@dataclass(frozen=True)
class ExecutionRow:
    id: str
    job_id: str
    scheduled_for: datetime
    trigger: str
    status: str
    attempt_count: int
    next_attempt_at: datetime | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    last_error: str | None
    missed_count: int | None = None
    replay_count: int = 0
    replayed_at: datetime | None = None
    completion_deadline: datetime | None = None


@dataclass(frozen=True)
class AttemptRow:
    number: int
    started_at: datetime
    duration_ms: int
    status_code: int | None
    error: str | None
    response_body: str | None
    response_truncated: bool
    output: str | None = None


def list_executions(
    conn: Any, tenant_id: str, job_id: str, limit: int, before: tuple[datetime, str] | None
) -> list[ExecutionRow]:
    """A job's executions, newest slot first; `before` is the (scheduled_for, id) of the last one seen."""
    return list_tenant_executions(conn, tenant_id, ExecutionFilter(job_id=job_id), limit, before)


def list_tenant_executions(
    conn: Any, tenant_id: str, filters: ExecutionFilter, limit: int, before: tuple[datetime, str] | None
) -> list[ExecutionRow]:
    """The tenant's executions, newest slot first (executions_tenant_newest, or executions_job_newest for one
    job); `before` is the (scheduled_for, id) of the last one seen."""
    where = "tenant_id = %(tenant_id)s"
    params: dict[str, Any] = {"tenant_id": tenant_id, "limit": limit}
    clauses = (
        ("statuses", list(filters.statuses) or None, " AND status = ANY(%(statuses)s::text[])"),
        ("job_id", filters.job_id, " AND job_id = %(job_id)s::uuid"),
        ("since", filters.since, " AND scheduled_for >= %(since)s"),
        ("until", filters.until, " AND scheduled_for < %(until)s"),
    )
    for name, value, clause in clauses:
        if value is not None:
            where += clause
            params[name] = value
    if before:
        where += " AND (scheduled_for, id) < (%(scheduled_for)s, %(id)s::uuid)"
        params.update(scheduled_for=before[0], id=before[1])
    with conn.cursor(row_factory=class_row(ExecutionRow)) as cur:
        return cur.execute(
            f"SELECT {_EXECUTION_COLUMNS} FROM executions WHERE {where}"
            " ORDER BY scheduled_for DESC, id DESC LIMIT %(limit)s",
            params,
        ).fetchall()


def get_execution(conn: Any, tenant_id: str, execution_id: str) -> ExecutionRow | None:
    with conn.cursor(row_factory=class_row(ExecutionRow)) as cur:
        return cur.execute(
            f"SELECT {_EXECUTION_COLUMNS} FROM executions WHERE id = %s AND tenant_id = %s",
            (execution_id, tenant_id),
        ).fetchone()


def list_attempts(conn: Any, execution_id: str) -> list[AttemptRow]:
    """An execution's attempts in order; call only for an execution already checked against the tenant."""
    with conn.cursor(row_factory=class_row(AttemptRow)) as cur:
        return cur.execute(
            "SELECT number, started_at, duration_ms, status_code, error, left(response_body, %(n)s) AS response_body,"
            " coalesce(length(response_body) > %(n)s, false) AS response_truncated, output"
            " FROM attempts WHERE execution_id = %(id)s ORDER BY number",
            {"id": execution_id, "n": RESPONSE_PREVIEW_CHARS},
        ).fetchall()
