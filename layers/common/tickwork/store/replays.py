"""SQL of replays (tickwork.tenant.replays): a job's runs to replay in a window, the tenant's replay pace, and
the conditional update that makes ended runs due again. Only the transaction whose update moved a run
dispatches it: a replay racing another, or the run's own executor, changes a row once.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Sequence

# The job's runs in the window, in slot order (executions_job_newest, read backwards).
_WINDOW = """
SELECT id::text, scheduled_for, replay_count FROM executions
 WHERE job_id = %(job_id)s AND tenant_id = %(tenant_id)s AND status = ANY(%(statuses)s::text[])
   AND scheduled_for >= %(since)s AND scheduled_for < %(until)s
 ORDER BY scheduled_for, id LIMIT %(limit)s
"""

# The job's state, its row held (FOR SHARE) until the transaction ends: a delete cannot slip in between the
# check and the replay (it skips the runs it finds pending, replayed ones included).
_JOB_STATUS = "SELECT status FROM jobs WHERE id = %(id)s AND tenant_id = %(tenant_id)s FOR SHARE"

# The tenant's next free replay instant, never before now; the row stays locked to the end of the
# transaction, so two replays of one tenant take their instants (and count what waits) one after the other.
_PACE_START = """
INSERT INTO replay_pace AS p (tenant_id, next_at) VALUES (%(tenant_id)s, %(now)s)
ON CONFLICT (tenant_id) DO UPDATE SET next_at = greatest(p.next_at, %(now)s)
RETURNING next_at
"""
_PACE_PEEK = "SELECT greatest(next_at, %(now)s) FROM replay_pace WHERE tenant_id = %(tenant_id)s"
_PACE_ADVANCE = "UPDATE replay_pace SET next_at = %(next_at)s WHERE tenant_id = %(tenant_id)s"

# Runs still in one of `statuses` and under the replay limit (re-checked under their row locks) become due
# again at their paced instant, in slot order: `queued` if never attempted, else `retrying` (the executor starts
# attempt attempt_count + 1 either way). replay_base lets the retry policy count the replay's attempts only.
_QUEUE = """
WITH picked AS (
    SELECT l.id, l.attempt_count, row_number() OVER (ORDER BY l.scheduled_for, l.id) - 1 AS rank
      FROM (SELECT id, scheduled_for, attempt_count FROM executions
             WHERE id = ANY(%(ids)s::uuid[]) AND tenant_id = %(tenant_id)s AND status = ANY(%(statuses)s::text[])
               AND replay_count < %(max_replays)s
             FOR UPDATE) l
)
UPDATE executions e
   SET status = CASE WHEN p.attempt_count = 0 THEN 'queued' ELSE 'retrying' END,
       replay_count = e.replay_count + 1, replayed_at = %(now)s, replay_base = p.attempt_count,
       next_attempt_at = %(start)s + p.rank * %(gap)s::interval,
       last_error = NULL, finished_at = NULL, delayed_at = NULL
  FROM picked p
 WHERE e.id = p.id
RETURNING e.id::text, e.job_id::text, e.attempt_count + 1, e.next_attempt_at, e.scheduled_for
"""


@dataclass(frozen=True)
class WindowRun:
    """A run of a job's window to replay: its id, its slot and how often it was replayed before."""

    id: str
    scheduled_for: datetime
    replay_count: int


@dataclass(frozen=True)
class Queued:
    """A run replayed: the attempt its executor starts and when it is due."""

    execution_id: str
    job_id: str
    attempt: int
    due: datetime
    scheduled_for: datetime


def window(conn: Any, tenant_id: str, job_id: str, statuses: Sequence[str], since: datetime, until: datetime,
           limit: int) -> list[WindowRun]:
    """The job's runs in `statuses` with a slot in [since, until), in slot order, at most `limit`."""
    params = {"job_id": job_id, "tenant_id": tenant_id, "statuses": list(statuses), "since": since,
              "until": until, "limit": limit}
    return [WindowRun(*row) for row in conn.execute(_WINDOW, params).fetchall()]


def job_status(conn: Any, tenant_id: str, job_id: str) -> str | None:
    """The tenant's job's status ('deleted' included), its row share-locked; None for no job of the tenant."""
    row = conn.execute(_JOB_STATUS, {"id": job_id, "tenant_id": tenant_id}).fetchone()
    return None if row is None else row[0]


def pace_start(conn: Any, tenant_id: str, now: datetime) -> datetime:
    """The tenant's next free replay instant (now at the earliest), its row locked for pace_advance: what
    waits before it is counted and reserved by one replay at a time."""
    return conn.execute(_PACE_START, {"tenant_id": tenant_id, "now": now}).fetchone()[0]


def pace_peek(conn: Any, tenant_id: str, now: datetime) -> datetime:
    """pace_start without reserving or locking anything (a dry run)."""
    row = conn.execute(_PACE_PEEK, {"tenant_id": tenant_id, "now": now}).fetchone()
    return now if row is None else row[0]


def pace_advance(conn: Any, tenant_id: str, next_at: datetime) -> None:
    conn.execute(_PACE_ADVANCE, {"tenant_id": tenant_id, "next_at": next_at})


def queue(conn: Any, tenant_id: str, ids: Sequence[str], statuses: Sequence[str], now: datetime, start: datetime,
          gap: timedelta, max_replays: int) -> list[Queued]:
    """Make those of these runs still in `statuses` and replayed fewer than `max_replays` times due again from
    `start`, `gap` apart in slot order; returns them in that order (the others changed meanwhile and are left
    alone)."""
    if not ids:
        return []
    params = {"ids": list(ids), "tenant_id": tenant_id, "statuses": list(statuses), "now": now, "start": start,
              "gap": gap, "max_replays": max_replays}
    rows = conn.execute(_QUEUE, params).fetchall()
    return sorted((Queued(*row) for row in rows), key=lambda q: (q.due, q.execution_id))
