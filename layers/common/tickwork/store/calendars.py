"""SQL over calendars, and the jobs that use them. Every query names the tenant."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Mapping, Sequence

from aws_lambda_powertools import Logger
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from tickwork.calendars.rules import Calendar
from tickwork.models import Job
from tickwork.store.jobs import JOB_COLUMNS, read_jobs

logger = Logger(child=True)


@dataclass(frozen=True)
class CalendarRow:
    name: str
    dates: list[date]
    ical: str | None
    compiled: dict[str, Any]
    created_at: datetime
    updated_at: datetime


_COLUMNS = "name, dates, ical, compiled, created_at, updated_at"


def calendar_of(tenant_id: str, name: str, compiled: Mapping[str, Any]) -> Calendar:
    """A stored compiled form as schedules read it. What of one stored by an older release lies outside the
    bounds (tickwork.calendars.bounds) is left out, in its `warnings`, and logged with the tenant and name."""
    calendar = Calendar.from_json(name, compiled)
    if calendar.warnings:
        logger.warning("calendar holds what is out of bounds: left out, it excludes nothing",
                       extra={"tenant_id": tenant_id, "calendar": name, "left_out": calendar.warnings})
    return calendar


def lock_tenant(conn: Any, tenant_id: str) -> None:
    """Serialise changes to one tenant's calendars (the count limit, a delete against a job using it)."""
    conn.execute("SELECT 1 FROM tenants WHERE id = %s FOR UPDATE", (tenant_id,))


def count(conn: Any, tenant_id: str) -> int:
    return int(conn.execute("SELECT count(*) FROM calendars WHERE tenant_id = %s", (tenant_id,)).fetchone()[0])


def put(conn: Any, tenant_id: str, row: CalendarRow) -> bool:
    """Create or replace; returns whether it was created."""
    created = conn.execute(
        "INSERT INTO calendars (tenant_id, name, dates, ical, compiled, created_at, updated_at)"
        " VALUES (%(tenant_id)s, %(name)s, %(dates)s, %(ical)s, %(compiled)s, %(created_at)s, %(updated_at)s)"
        " ON CONFLICT (tenant_id, name) DO UPDATE SET dates = excluded.dates, ical = excluded.ical,"
        " compiled = excluded.compiled, updated_at = excluded.updated_at"
        " RETURNING (xmax = 0)",
        {"tenant_id": tenant_id, "name": row.name, "dates": row.dates, "ical": row.ical,
         "compiled": Jsonb(row.compiled), "created_at": row.created_at, "updated_at": row.updated_at},
    ).fetchone()[0]
    return bool(created)


def get(conn: Any, tenant_id: str, name: str) -> CalendarRow | None:
    with conn.cursor(row_factory=class_row(CalendarRow)) as cur:
        return cur.execute(f"SELECT {_COLUMNS} FROM calendars WHERE tenant_id = %s AND name = %s",
                           (tenant_id, name)).fetchone()


def list_all(conn: Any, tenant_id: str) -> list[CalendarRow]:
    """Every calendar of the tenant (at most its limit), by name."""
    with conn.cursor(row_factory=class_row(CalendarRow)) as cur:
        return cur.execute(f"SELECT {_COLUMNS} FROM calendars WHERE tenant_id = %s ORDER BY name",
                           (tenant_id,)).fetchall()


def compiled(conn: Any, pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], tuple[dict[str, Any], datetime]]:
    """{(tenant id, name): (compiled form, updated_at)} of these calendars, in one statement (the poller's)."""
    if not pairs:
        return {}
    rows = conn.execute(
        "SELECT c.tenant_id::text, c.name, c.compiled, c.updated_at FROM calendars c"
        " JOIN unnest(%s::uuid[], %s::text[]) AS p(tenant_id, name) ON p.tenant_id = c.tenant_id AND p.name = c.name",
        ([p[0] for p in pairs], [p[1] for p in pairs]),
    ).fetchall()
    return {(row[0], row[1]): (row[2], row[3]) for row in rows}


def existing(conn: Any, tenant_id: str, names: Sequence[str]) -> set[str]:
    """Which of these names are calendars of the tenant."""
    rows = conn.execute("SELECT name FROM calendars WHERE tenant_id = %s AND name = ANY(%s)", (tenant_id, list(names)))
    return {row[0] for row in rows}


def lock(conn: Any, tenant_id: str, name: str) -> bool:
    """Lock the tenant's calendar `name` FOR UPDATE; False when there is none."""
    sql = "SELECT 1 FROM calendars WHERE tenant_id = %s AND name = %s FOR UPDATE"
    return conn.execute(sql, (tenant_id, name)).fetchone() is not None


def compiled_by_name(conn: Any, tenant_id: str, names: Sequence[str], *, share: bool = False) -> dict[str, Any]:
    """The compiled form of each of the tenant's calendars named in `names` that exists, by name; `share`: held
    FOR SHARE, so that a concurrent delete waits."""
    lock = " FOR SHARE" if share else ""
    sql = f"SELECT name, compiled FROM calendars WHERE tenant_id = %s AND name = ANY(%s){lock}"
    return dict(conn.execute(sql, (tenant_id, list(names))).fetchall())


def delete(conn: Any, tenant_id: str, name: str) -> bool:
    return conn.execute("DELETE FROM calendars WHERE tenant_id = %s AND name = %s", (tenant_id, name)).rowcount == 1


def jobs_using(conn: Any, tenant_id: str, name: str, *, lock: bool = False, limit: int | None = None) -> list[Job]:
    """The tenant's live jobs whose calendar excludes by `name` (jobs_tenant_calendar), oldest first; `lock`
    holds their rows until the caller's transaction ends."""
    sql = (f"SELECT {JOB_COLUMNS} FROM jobs WHERE tenant_id = %(tenant_id)s AND status <> 'deleted'"
           " AND calendar IS NOT NULL AND calendar -> 'exclude' ? %(name)s ORDER BY created_at, id")
    sql += " LIMIT %(limit)s" if limit is not None else ""
    sql += " FOR UPDATE" if lock else ""
    return read_jobs(conn, sql, {"tenant_id": tenant_id, "name": name, "limit": limit})
