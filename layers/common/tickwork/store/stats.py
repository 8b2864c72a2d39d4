"""Aggregates over a tenant's recent executions, for GET /stats (executions_tenant_newest serves both)."""
from __future__ import annotations

from datetime import datetime
from typing import Any

# The first attempt's send time minus its slot, for runs the schedule made: a manual run's "slot" is the
# moment it was asked for, which says nothing about how punctually the scheduler fires; a replayed run's
# first attempt may be its replay's (a missed slot's), sent when asked for: left out too. Clamped at 0 as
# the FireLag metric is (an executor sends at the slot, never before; a negative value is clock skew).
_FIRE_LAG = """
SELECT count(*), percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY lag_ms)
FROM (
    SELECT greatest(extract(epoch FROM a.started_at - e.scheduled_for) * 1000, 0) AS lag_ms
    FROM executions e JOIN attempts a ON a.execution_id = e.id AND a.number = 1
    WHERE e.tenant_id = %(tenant_id)s AND e.scheduled_for >= %(since)s AND e.scheduled_for < %(until)s
      AND e.trigger = 'schedule' AND e.replay_count = 0
) lags
"""


def newest_slot_past(conn: Any, tenant_id: str, since: datetime, until: datetime, n: int) -> datetime | None:
    """The slot of the tenant's execution after its newest n in [since, until), None if there are no more
    than n: an index-only walk of n entries of executions_tenant_newest."""
    row = conn.execute(
        "SELECT scheduled_for FROM executions"
        " WHERE tenant_id = %(tenant_id)s AND scheduled_for >= %(since)s AND scheduled_for < %(until)s"
        " ORDER BY scheduled_for DESC OFFSET %(skip)s LIMIT 1",
        {"tenant_id": tenant_id, "since": since, "until": until, "skip": n},
    ).fetchone()
    return None if row is None else row[0]


def runs_by_status(conn: Any, tenant_id: str, since: datetime, until: datetime) -> dict[str, int]:
    """How many executions of the tenant have a slot in [since, until), per status (absent: none)."""
    rows = conn.execute(
        "SELECT status, count(*) FROM executions"
        " WHERE tenant_id = %(tenant_id)s AND scheduled_for >= %(since)s AND scheduled_for < %(until)s"
        " GROUP BY status",
        {"tenant_id": tenant_id, "since": since, "until": until},
    ).fetchall()
    return {status: count for status, count in rows}


def fire_lag_percentiles(
    conn: Any, tenant_id: str, since: datetime, until: datetime
) -> tuple[int, list[float] | None]:
    """(first attempts measured, their fire lag in ms at p50/p95/p99, None when there were none)."""
    count, percentiles = conn.execute(_FIRE_LAG, {"tenant_id": tenant_id, "since": since, "until": until}).fetchone()
    return count, None if percentiles is None else [float(p) for p in percentiles]
