"""SQL over notifications and the watched jobs' counters (tickwork.rules.notifications)."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Sequence

from psycopg.types.json import Jsonb

from tickwork.models import StartedExecution
from tickwork.rules.notifications import Event, Verdict, WatchState
from tickwork.store.executions import STARTED_COLUMNS, started_execution
from tickwork.store.maintenance import Budget, delete_in_batches

_LOCK_STATES = """
SELECT id::text, tenant_id::text, status, notify, pause_after_failures, consecutive_failures, failing
  FROM jobs WHERE id = ANY(%(ids)s::uuid[]) ORDER BY id FOR UPDATE
"""

# A pause only takes an active job (one paused or deleted meanwhile stays as it is) out of the schedule.
_SAVE_STATES = """
UPDATE jobs j
   SET consecutive_failures = u.failures, failing = u.failing,
       status = CASE WHEN u.reason IS NOT NULL AND j.status = 'active' THEN 'paused' ELSE j.status END,
       next_run_at = CASE WHEN u.reason IS NOT NULL AND j.status = 'active' THEN NULL ELSE j.next_run_at END,
       paused_reason = CASE WHEN u.reason IS NOT NULL AND j.status = 'active' THEN u.reason ELSE j.paused_reason END,
       updated_at = CASE WHEN u.reason IS NOT NULL AND j.status = 'active' THEN %(now)s ELSE j.updated_at END
  FROM unnest(%(ids)s::uuid[], %(failures)s::int[], %(failing)s::bool[], %(reasons)s::text[])
    AS u(id, failures, failing, reason)
 WHERE j.id = u.id
"""

# A run as the executor would have started it (store.executions._START), for the sweeper ending it.
_RUN = f"SELECT {STARTED_COLUMNS} FROM executions e JOIN jobs j ON j.id = e.job_id WHERE e.id = %(id)s"

_INSERT = """
INSERT INTO notifications (id, tenant_id, job_id, execution_id, channel, type, url, payload, next_attempt_at)
SELECT * FROM unnest(%(ids)s::uuid[], %(tenants)s::uuid[], %(jobs)s::uuid[], %(executions)s::uuid[],
                     %(channels)s::text[], %(types)s::text[], %(urls)s::text[], %(payloads)s::jsonb[],
                     %(dues)s::timestamptz[])
ON CONFLICT (id) DO NOTHING
RETURNING id::text
"""

# One more failure of a job in a minute whose first was told already: its summary row is made, or counts it
# (and tells the latest) while it has not gone; the xmax test says which (0: a row inserted here).
_SUMMARISE = """
INSERT INTO notifications (id, tenant_id, job_id, execution_id, channel, type, url, payload, next_attempt_at)
VALUES (%(id)s, %(tenant)s, %(job)s, %(execution)s, 'operator', %(type)s, NULL, %(payload)s, %(due)s)
ON CONFLICT (id) DO UPDATE
   SET payload = EXCLUDED.payload || jsonb_build_object('failures', (notifications.payload->>'failures')::int + 1)
 WHERE notifications.status = 'pending' AND notifications.attempt_count = 0
RETURNING xmax = 0
"""

# The barrier against sending an attempt twice: only the dispatch whose attempt is next starts it.
_START = """
UPDATE notifications
   SET status = 'sending', attempt_count = attempt_count + 1, attempt_started_at = greatest(now(), next_attempt_at)
 WHERE id = %(id)s AND status = 'pending' AND attempt_count = %(attempt)s - 1
RETURNING id::text, tenant_id::text, job_id::text, channel, url, payload, attempt_count, created_at,
          attempt_started_at
"""

_FINISH = """
UPDATE notifications
   SET status = %(status)s, next_attempt_at = coalesce(%(next)s, next_attempt_at), last_status_code = %(code)s,
       last_error = %(error)s, finished_at = CASE WHEN %(status)s IN ('delivered', 'failed') THEN now() END
 WHERE id = %(id)s AND status = 'sending' AND attempt_count = %(attempt)s
"""

# Only finished ones (a notification still pending is never dropped by age), oldest first along
# notifications_final_created.
_PRUNE = """
DELETE FROM notifications WHERE id IN (
    SELECT id FROM notifications WHERE created_at < %(cutoff)s AND status IN ('delivered', 'failed')
     ORDER BY created_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
"""

_COLUMNS = ("id::text, job_id::text, execution_id::text, type, status, attempt_count, next_attempt_at,"
            " last_status_code, last_error, payload, created_at, finished_at")

# Pending attempts whose dispatch may be lost: overdue, or further ahead than any dispatch would be.
_AWAITING = """
SELECT id::text, attempt_count + 1, next_attempt_at FROM notifications
 WHERE status = 'pending' AND (next_attempt_at < %(stale)s OR next_attempt_at > %(ahead)s)
 ORDER BY next_attempt_at LIMIT %(limit)s
"""

_SENDING_SINCE = """
SELECT id::text, attempt_count, attempt_started_at FROM notifications
 WHERE status = 'sending' AND attempt_started_at < %(before)s ORDER BY attempt_started_at LIMIT %(limit)s
"""


@dataclass(frozen=True)
class Delivery:
    """A notification attempt this caller started."""

    id: str
    tenant_id: str
    job_id: str
    channel: str
    url: str | None
    payload: dict[str, Any]
    attempt: int
    created_at: datetime
    attempt_started_at: datetime


@dataclass(frozen=True)
class NotificationRow:
    id: str
    job_id: str
    execution_id: str
    type: str
    status: str
    attempt_count: int
    next_attempt_at: datetime
    last_status_code: int | None
    last_error: str | None
    payload: dict[str, Any]
    created_at: datetime
    finished_at: datetime | None


def lock_states(conn: Any, job_ids: Sequence[str]) -> dict[str, WatchState]:
    """The jobs' counters, locked until the caller's transaction ends (in id order: no deadlock)."""
    rows = conn.execute(_LOCK_STATES, {"ids": sorted(set(job_ids))}).fetchall()
    return {row[0]: WatchState(*row) for row in rows}


def save_states(conn: Any, verdicts: Sequence[Verdict], now: datetime) -> None:
    if verdicts:
        conn.execute(_SAVE_STATES, {
            "ids": [v.state.job_id for v in verdicts], "failures": [v.state.consecutive_failures for v in verdicts],
            "failing": [v.state.failing for v in verdicts], "reasons": [v.paused_reason for v in verdicts],
            "now": now,
        })


def run_of(conn: Any, execution_id: str) -> StartedExecution | None:
    row = conn.execute(_RUN, {"id": execution_id}).fetchone()
    return None if row is None else started_execution(row)


def insert_events(conn: Any, events: Sequence[Event], due: datetime) -> list[str]:
    """Record events, first attempt due at `due`; returns the ids new here (an event seen before is kept)."""
    if not events:
        return []
    return [row[0] for row in conn.execute(_INSERT, {
        "ids": [e.id for e in events], "tenants": [e.tenant_id for e in events], "jobs": [e.job_id for e in events],
        "executions": [e.execution_id for e in events], "channels": [e.channel for e in events],
        "types": [e.type for e in events], "urls": [e.url for e in events],
        "payloads": [Jsonb(e.payload) for e in events], "dues": [due] * len(events),
    }).fetchall()]


def summarise(conn: Any, summary: Event, due: datetime) -> bool:
    """Count a failure into its minute's operator summary, first attempt due at `due`; True when the summary
    is new here (to dispatch). A summary already sent (a failure recorded after its minute's end) is left."""
    row = conn.execute(_SUMMARISE, {
        "id": summary.id, "tenant": summary.tenant_id, "job": summary.job_id, "execution": summary.execution_id,
        "type": summary.type, "payload": Jsonb(summary.payload), "due": due,
    }).fetchone()
    return bool(row and row[0])


def owners(conn: Any, notification_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
    """The (tenant, job) of each notification still there, by id."""
    rows = conn.execute("SELECT id::text, tenant_id::text, job_id::text FROM notifications WHERE id = ANY(%s::uuid[])",
                        (list(notification_ids),)).fetchall()
    return {notification_id: (tenant_id, job_id) for notification_id, tenant_id, job_id in rows}


def start(conn: Any, notification_id: str, attempt: int) -> Delivery | None:
    """Start attempt `attempt` unless another dispatch already did (or the notification is over)."""
    row = conn.execute(_START, {"id": notification_id, "attempt": attempt}).fetchone()
    return None if row is None else Delivery(*row)


def finish(
    conn: Any, notification_id: str, attempt: int, status: str, next_attempt_at: datetime | None,
    status_code: int | None, error: str | None,
) -> bool:
    """Record how the attempt ended (`pending` with the next attempt's time, `delivered` or `failed`);
    False when it was no longer the running one (the sweeper ended it)."""
    return conn.execute(_FINISH, {
        "id": notification_id, "attempt": attempt, "status": status, "next": next_attempt_at,
        "code": status_code, "error": error,
    }).rowcount == 1


def list_for_job(conn: Any, job_id: str, limit: int) -> list[NotificationRow]:
    """A job's webhook notifications, newest first (operator events are the deployment's, not shown)."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM notifications WHERE job_id = %s AND channel = 'webhook'"
        " ORDER BY created_at DESC, id DESC LIMIT %s", (job_id, limit),
    ).fetchall()
    return [NotificationRow(*row) for row in rows]


def awaiting(conn: Any, stale: datetime, ahead: datetime, limit: int) -> list[tuple[str, int, datetime]]:
    """(id, attempt, due) of pending attempts due before `stale` or after `ahead`."""
    return [tuple(row) for row in conn.execute(_AWAITING, {"stale": stale, "ahead": ahead, "limit": limit})]


def sending_since(conn: Any, before: datetime, limit: int) -> list[tuple[str, int, datetime]]:
    """(id, attempt, started) of attempts still sending that started before `before`."""
    return [tuple(row) for row in conn.execute(_SENDING_SINCE, {"before": before, "limit": limit})]


def prune(conn: Any, cutoff: datetime, batch: int, budget: Budget) -> int:
    """Delete finished notifications created before `cutoff`, oldest first, `batch` rows per statement, until
    the budget is spent; returns how many."""
    return delete_in_batches(conn, _PRUNE, {"cutoff": cutoff}, batch, budget)
