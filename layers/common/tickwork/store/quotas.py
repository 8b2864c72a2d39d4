"""SQL for tenant quotas: the per-tenant overrides (NULL: the deployment's default) and what counts against them."""
from __future__ import annotations

from typing import Any, Mapping

_FIELDS = ("max_jobs", "min_interval_seconds", "max_runs_per_minute", "max_history_rows", "max_runs_in_flight",
           "max_storage_bytes", "max_replays_queued")
_COLUMNS = ", ".join(_FIELDS)


def lock_tenant(conn: Any, tenant_id: str) -> dict[str, int | None]:
    """The tenant's overrides, its row locked until the transaction ends (serializes quota checks)."""
    row = conn.execute(f"SELECT {_COLUMNS} FROM tenants WHERE id = %s FOR UPDATE", (tenant_id,)).fetchone()
    return dict(zip(_FIELDS, row or (None,) * len(_FIELDS)))


def get_overrides(conn: Any, tenant_id: str) -> dict[str, int | None]:
    row = conn.execute(f"SELECT {_COLUMNS} FROM tenants WHERE id = %s", (tenant_id,)).fetchone()
    return dict(zip(_FIELDS, row or (None,) * len(_FIELDS)))


def history_overrides(conn: Any) -> list[tuple[str, int | None]]:
    """(tenant id, its max_history_rows override or None) for every tenant."""
    return [(str(t), n) for t, n in conn.execute("SELECT id, max_history_rows FROM tenants ORDER BY id")]


def set_overrides(conn: Any, tenant_id: str, changes: Mapping[str, int | None]) -> bool:
    """Set the given overrides (None: back to the default); False if there is no such tenant."""
    fields = [name for name in _FIELDS if name in changes]
    if not fields:
        return conn.execute("SELECT 1 FROM tenants WHERE id = %s", (tenant_id,)).fetchone() is not None
    assignments = ", ".join(f"{name} = %({name})s" for name in fields)
    return conn.execute(
        f"UPDATE tenants SET {assignments} WHERE id = %(id)s", {**changes, "id": tenant_id}
    ).rowcount == 1


def count_jobs(conn: Any, tenant_id: str) -> int:
    return conn.execute(
        "SELECT count(*) FROM jobs WHERE tenant_id = %s AND status <> 'deleted'", (tenant_id,)
    ).fetchone()[0]


def active_schedules(conn: Any, tenant_id: str, except_job: str) -> list[tuple[str, str, int]]:
    """(schedule, timezone, how many) over the tenant's active jobs other than `except_job`."""
    return [(str(s), str(z), int(n)) for s, z, n in conn.execute(
        "SELECT schedule, timezone, count(*) FROM jobs WHERE tenant_id = %s AND status = 'active' AND id <> %s"
        " GROUP BY schedule, timezone",
        (tenant_id, except_job),
    )]
