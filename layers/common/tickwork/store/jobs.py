"""SQL over the jobs table."""
from __future__ import annotations

from typing import Any, Iterator

from psycopg.rows import class_row

from tickwork.models import JobRow

JOB_COLUMNS = (
    "id::text, tenant_id::text, name, schedule, timezone, start_at, end_at, request, retry, status,"
    " next_run_at, version, created_at, updated_at"
)


def get_jobs(conn: Any, job_ids: list[str]) -> list[JobRow]:
    """Jobs by id regardless of tenant: for the poller and reconciler, never for the API."""
    if not job_ids:
        return []
    with conn.cursor(row_factory=class_row(JobRow)) as cur:
        return cur.execute(f"SELECT {JOB_COLUMNS} FROM jobs WHERE id = ANY(%s::uuid[])", (job_ids,)).fetchall()


def iter_active_jobs(conn: Any, batch: int = 1000) -> Iterator[list[JobRow]]:
    """Every active job, in id order, a batch at a time (keyset pagination: no long-running cursor)."""
    last = "00000000-0000-0000-0000-000000000000"
    while True:
        with conn.cursor(row_factory=class_row(JobRow)) as cur:
            rows = cur.execute(
                f"SELECT {JOB_COLUMNS} FROM jobs WHERE status = 'active' AND id > %s ORDER BY id LIMIT %s",
                (last, batch),
            ).fetchall()
        if not rows:
            return
        yield rows
        last = rows[-1].id
