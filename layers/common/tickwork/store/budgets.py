"""SQL of the runs-in-flight budget (tickwork.dispatch.budget): what the dispatch step needs to know of each
run, and the runs it holds back or finds too late."""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Sequence

from tickwork.rules.budget import HeldBack
from tickwork.timeutil import to_ms

# Each dispatched attempt's run, if it still waits for that attempt: its tenant, the tenant's override of
# max_runs_in_flight, and, for a first run of a slot held back before (not a replay: asked for by hand, it
# waits like a manual run), what its job's catch-up policy needs
# (whether a later slot is recorded: one primary-key range probe, only for such runs).
_RUNS = """
SELECT e.id::text, r.attempt, e.tenant_id::text, t.max_runs_in_flight, e.scheduled_for, e.delayed_at, j.catchup,
       j.catchup_window_seconds,
       CASE WHEN e.delayed_at IS NOT NULL AND e.trigger = 'schedule' AND e.replay_count = 0 AND r.attempt = 1
                 AND j.catchup = 'latest'
            THEN EXISTS (SELECT 1 FROM executions n WHERE n.job_id = e.job_id AND n.scheduled_for > e.scheduled_for
                            AND n.trigger = 'schedule' AND n.status <> 'missed')
            ELSE false END,
       e.delayed_at IS NOT NULL AND e.trigger = 'schedule' AND e.replay_count = 0 AND r.attempt = 1
  FROM unnest(%(ids)s::uuid[], %(attempts)s::int[]) AS r(id, attempt)
  JOIN executions e ON e.id = r.id JOIN jobs j ON j.id = e.job_id JOIN tenants t ON t.id = e.tenant_id
 WHERE e.status IN ('queued', 'retrying') AND e.attempt_count = r.attempt - 1
"""

# Runs held back: the reason in last_error while they wait (written only when it changes), and when that
# first happened. Runs too late: missed, if still waiting for their first attempt.
_HOLD_BACK = """
UPDATE executions e
   SET last_error = r.note, delayed_at = coalesce(e.delayed_at, %(now)s),
       status = CASE WHEN r.missed THEN 'missed' ELSE e.status END,
       missed_count = CASE WHEN r.missed THEN 1 ELSE e.missed_count END,
       finished_at = CASE WHEN r.missed THEN %(now)s ELSE e.finished_at END
  FROM unnest(%(ids)s::uuid[], %(attempts)s::int[], %(missed)s::bool[], %(notes)s::text[])
    AS r(id, attempt, missed, note)
 WHERE e.id = r.id AND e.status IN ('queued', 'retrying') AND e.attempt_count = r.attempt - 1
   AND (CASE WHEN r.missed THEN e.status = 'queued'
             ELSE e.last_error IS DISTINCT FROM r.note OR e.delayed_at IS NULL END)
RETURNING e.id::text, r.missed
"""


@dataclass(frozen=True)
class WaitingRun:
    """A run waiting for the attempt dispatched: whose it is, and its past if the budget held it back before."""

    execution_id: str
    tenant_id: str
    budget_override: int | None
    delayed_at_ms: int | None  # when the budget first held it back
    held: HeldBack | None  # set for a first run of a schedule slot held back before


def waiting_runs(conn: Any, attempts: Sequence[tuple[str, int]]) -> dict[tuple[str, int], WaitingRun]:
    """Of these (execution id, attempt), the runs still waiting for that attempt, by (execution id, attempt)
    (an id that is no uuid, a due index member nothing wrote, is none)."""
    attempts = [a for a in attempts if _is_uuid(a[0])]
    if not attempts:
        return {}
    rows = conn.execute(_RUNS, {"ids": [a[0] for a in attempts], "attempts": [a[1] for a in attempts]}).fetchall()
    return {(row[0], row[1]): _waiting(row[0], *row[2:]) for row in rows}


def _is_uuid(raw: str) -> bool:
    try:
        uuid.UUID(raw)
    except ValueError:
        return False
    return True


def _waiting(execution_id: str, tenant_id: str, override: int | None, scheduled_for: datetime,
             delayed_at: datetime | None, catchup: str, window: int, superseded: bool, slot: bool) -> WaitingRun:
    held = HeldBack(to_ms(scheduled_for), catchup, window, superseded) if slot else None
    return WaitingRun(execution_id, tenant_id, override, None if delayed_at is None else to_ms(delayed_at), held)


@dataclass(frozen=True)
class Held:
    """A dispatched attempt the budget does not send now: held back with why, or recorded missed (too late)."""

    execution_id: str
    attempt: int
    missed: bool
    note: str


def hold_back(conn: Any, runs: Sequence[Held], now: datetime) -> list[str]:
    """Note the runs held back or recorded missed; returns the ids recorded missed (a run that started meanwhile
    is left alone)."""
    if not runs:
        return []
    params = {"ids": [r.execution_id for r in runs], "attempts": [r.attempt for r in runs],
              "missed": [r.missed for r in runs], "notes": [r.note for r in runs], "now": now}
    return [row[0] for row in conn.execute(_HOLD_BACK, params).fetchall() if row[1]]
