"""SQL of a run stopped at its instant: started ahead of it (tickwork.store.executions.start_unguarded_many), its job
paused or deleted since, it is recorded skipped instead of sent (tickwork.runs.executor)."""
from __future__ import annotations

from typing import Any, Sequence

from tickwork.store.executions import STOPPED, stopped_note

BEFORE_ITS_INSTANT = " before its instant"

# The attempt it started is undone (no attempt was made; a retry keeps the count of those that were), and a first
# attempt's start with it. Only a run its job no longer makes: a manual run or a replay of a paused job goes ahead.
_DROP = f"""
UPDATE executions e
   SET status = 'skipped', last_error = %(note)s || j.status || %(before)s, attempt_count = r.attempt - 1,
       started_at = CASE WHEN r.attempt = 1 THEN NULL ELSE e.started_at END, next_attempt_at = NULL,
       finished_at = now()
  FROM unnest(%(ids)s::uuid[], %(attempts)s::int[]) AS r(id, attempt), jobs j
 WHERE e.id = r.id AND j.id = e.job_id AND e.status = 'running' AND e.attempt_count = r.attempt AND {STOPPED}
RETURNING e.id::text, j.status
"""


def drop_stopped(conn: Any, runs: Sequence[tuple[str, int]]) -> dict[str, str]:
    """Of these (execution id, attempt) started and not yet sent, record skipped those their job no longer makes;
    returns them with their job's status ('paused' or 'deleted'). One statement."""
    if not runs:
        return {}
    params = {"ids": [r[0] for r in runs], "attempts": [r[1] for r in runs], "note": stopped_note(""),
              "before": BEFORE_ITS_INSTANT}
    return dict(conn.execute(_DROP, params).fetchall())
