"""SQL of the maintenance task: rows the reconciler and the sweeper look at, and the retention delete.

Every read walks its rows by id in pages (keyset: no long-running cursor, no row left behind because an
earlier page is still stuck); the sweeper's reads stop after `max_pages` so one run stays short, and the
retention deletes when their time `Budget` is spent.
"""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Iterable, Iterator, Mapping, NamedTuple, Sequence

from tickwork.models import CalendarRef, StartedExecution
from tickwork.store.executions import STARTED_COLUMNS, started_execution

_FIRST_ID = "00000000-0000-0000-0000-000000000000"
_LAST_ID = "ffffffff-ffff-ffff-ffff-ffffffffffff"
# Every query below orders by the uuid column itself, never by its text form, to match `id > after`.

# Only what an active job's index entry is made of: its score and the columns its spec comes from. The
# score is computed here, as timeutil.to_ms would (floor to the millisecond): exact, and no datetime
# for Python to build per job. A job in quarantine is not claimable before its retry (tickwork.dispatch.quarantine).
_INDEX_COLUMNS = ("id::text, (extract(epoch FROM date_trunc('milliseconds', next_run_at)) * 1000)::bigint,"
                  " schedule, timezone, start_at, end_at, created_at, version, catchup, catchup_window_seconds,"
                  " tenant_id::text,"
                  " spread_seconds, calendar,"
                  " (extract(epoch FROM date_trunc('milliseconds', retry_errored_at)) * 1000)::bigint")
_INDEX_PAGE = f"""
SELECT {_INDEX_COLUMNS} FROM jobs
 WHERE status = 'active' AND id > %(after)s::uuid
 ORDER BY jobs.id LIMIT %(limit)s
"""
_INDEX_ROWS = f"SELECT {_INDEX_COLUMNS} FROM jobs WHERE id = ANY(%(ids)s::uuid[]) AND status = 'active'"
# The same stretch of the primary key as a page just read: its rows are still in cache.
_NOT_ACTIVE_BETWEEN = """
SELECT id::text FROM jobs WHERE id > %(after)s::uuid AND id <= %(last)s::uuid AND status <> 'active'
"""

# Only the few ids that are not (or no longer) active come back: a page of live jobs costs no rows. One
# primary-key lookup per id, written as a scalar subquery: as an anti-join the planner hashed the whole
# jobs table for every page (75-260 ms per 2,000 ids at 100,000 jobs).
_NOT_ACTIVE_AMONG = """
SELECT u.id::text FROM unnest(%(ids)s::uuid[]) AS u(id)
 WHERE (SELECT j.status FROM jobs j WHERE j.id = u.id) IS DISTINCT FROM 'active'
"""

# Active jobs whose recorded next slot is already old: normally none, since recording a slot advances
# next_run_at in the same statement; the reconciler checks these against the due index. A job in quarantine
# is behind on purpose: its entry waits for its retry (tickwork.dispatch.quarantine).
_OVERDUE_JOBS = """
SELECT id::text, next_run_at FROM jobs
 WHERE status = 'active' AND next_run_at < %(before)s AND retry_errored_at IS NULL AND id > %(after)s::uuid
 ORDER BY jobs.id LIMIT %(limit)s
"""

# Jobs that may have ended with no run left to end them: no next slot, and max_runs reached (active) or
# end_action delete (completed). Their last slot skipped or missed, or their last run skipped or missed before
# it was sent, no run's end finishes them; the ending module decides (tickwork.runs.ending.finish).
_UNFINISHED_JOBS = """
SELECT id::text FROM jobs
 WHERE next_run_at IS NULL AND id > %(after)s::uuid
   AND ((status = 'active' AND runs_sent >= max_runs) OR (status = 'completed' AND end_action = 'delete'))
 ORDER BY jobs.id LIMIT %(limit)s
"""

# Runs waiting for a dispatch that may have been lost: queued for a while, or a retry that is overdue
# (or still ahead, in case the index lost it). Retries due right now are being dispatched: left alone. A
# replayed run that was never attempted is `queued` with its due time (the tenant's replay pace): timed
# like a retry, not by its (old) creation.
_AWAITING_DISPATCH = """
SELECT id::text, attempt_count + 1, next_attempt_at FROM executions
 WHERE status IN ('queued', 'retrying') AND id > %(after)s::uuid
   AND ((status = 'queued' AND next_attempt_at IS NULL AND created_at < %(stale)s)
        OR ((status = 'retrying' OR next_attempt_at IS NOT NULL)
            AND (next_attempt_at < %(stale)s OR next_attempt_at > %(ahead)s)))
 ORDER BY executions.id LIMIT %(limit)s
"""

# Attempts running since before `before`; the caller compares each with its own request timeout.
_LONG_RUNNING = f"""
SELECT {STARTED_COLUMNS}, coalesce(e.attempt_started_at, e.started_at)
  FROM executions e JOIN jobs j ON j.id = e.job_id
 WHERE e.status = 'running' AND coalesce(e.attempt_started_at, e.started_at) < %(before)s
   AND e.id > %(after)s::uuid
 ORDER BY e.id LIMIT %(limit)s
"""

# Finished runs only (a list of final states, so a new unfinished state is never deleted by omission),
# oldest first along executions_final_created (its predicate is this list); attempts go with them (ON
# DELETE CASCADE). SKIP LOCKED: never wait behind a writer.
_FINAL = "('succeeded', 'failed', 'skipped', 'missed', 'lost')"
_PRUNE = f"""
DELETE FROM executions WHERE id IN (
    SELECT id FROM executions
     WHERE created_at < %(cutoff)s AND status IN {_FINAL}
     ORDER BY created_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
"""

# A tenant's history past its quota, along executions_tenant_newest: the newest run beyond the first
# `keep` (an index-only walk of `keep` entries), then finished runs from there back, oldest first.
_HISTORY_BOUNDARY = """
SELECT scheduled_for, id::text FROM executions WHERE tenant_id = %(tenant_id)s
 ORDER BY scheduled_for DESC, id DESC OFFSET %(keep)s LIMIT 1
"""
_PRUNE_HISTORY = f"""
DELETE FROM executions WHERE id IN (
    SELECT id FROM executions
     WHERE tenant_id = %(tenant_id)s AND (scheduled_for, id) <= (%(scheduled_for)s, %(id)s::uuid)
       AND status IN {_FINAL}
     ORDER BY scheduled_for, id LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
"""


class IndexRow(NamedTuple):
    """An active job as the due index needs it (a tuple: a rebuild makes one per job)."""

    id: str
    next_run_ms: int | None
    schedule: str
    timezone: str
    start_at: datetime | None
    end_at: datetime | None
    created_at: datetime
    version: int
    catchup: str
    catchup_window_seconds: int
    tenant_id: str
    spread_seconds: int = 0
    calendar: CalendarRef | None = None
    retry_ms: int | None = None  # in quarantine: claimable again from then on (epoch ms)


@dataclass(frozen=True)
class AwaitingDispatch:
    execution_id: str
    attempt: int
    next_attempt_at: datetime | None  # None for a queued first attempt


@dataclass(frozen=True)
class RunningAttempt:
    """An attempt still running: its run, and when the attempt started (for a run started before attempts
    had a start of their own, the run's)."""

    run: StartedExecution
    started_at: datetime


def _pages(conn: Any, sql: str, params: dict[str, Any], batch: int, max_pages: int | None) -> Iterator[list[Any]]:
    after = _FIRST_ID
    pages: Iterable[int] = itertools.count() if max_pages is None else range(max_pages)
    for _ in pages:
        rows = conn.execute(sql, {**params, "after": after, "limit": batch}).fetchall()
        if rows:
            yield rows
        if len(rows) < batch:
            return
        after = rows[-1][0]


def _index_row(row: Sequence[Any]) -> IndexRow:
    """A row of _INDEX_COLUMNS, its calendar column (JSON) parsed."""
    read = IndexRow._make(row)
    stored: Mapping[str, Any] | None = read.calendar  # type: ignore[assignment]  # JSON as read
    return read if stored is None else read._replace(calendar=CalendarRef.from_dict(stored))


def index_page(conn: Any, after: str | None, limit: int) -> list[IndexRow]:
    """Up to `limit` active jobs with an id after `after` (None: from the first), in id order."""
    rows = conn.execute(_INDEX_PAGE, {"after": after or _FIRST_ID, "limit": limit}).fetchall()
    return [_index_row(row) for row in rows]


def index_pages(conn: Any, batch: int) -> Iterator[list[IndexRow]]:
    """Every active job, a page at a time."""
    for rows in _pages(conn, _INDEX_PAGE, {}, batch, None):
        yield [_index_row(row) for row in rows]


def index_rows(conn: Any, job_ids: list[str]) -> list[IndexRow]:
    """Those of these jobs that are active."""
    return [_index_row(row) for row in conn.execute(_INDEX_ROWS, {"ids": job_ids})] if job_ids else []


def not_active_between(conn: Any, after: str | None, last: str | None) -> list[str]:
    """Jobs with an id in (after, last] that are paused, completed or deleted (None: no bound)."""
    params = {"after": after or _FIRST_ID, "last": last or _LAST_ID}
    return [row[0] for row in conn.execute(_NOT_ACTIVE_BETWEEN, params)]


def not_active_among(conn: Any, job_ids: list[str]) -> list[str]:
    """Those of these jobs that are paused, completed, deleted or gone."""
    return [row[0] for row in conn.execute(_NOT_ACTIVE_AMONG, {"ids": job_ids})] if job_ids else []


def overdue_jobs(conn: Any, before: datetime, batch: int, max_pages: int) -> Iterator[dict[str, datetime]]:
    """Pages of {job id: next_run_at} for active jobs whose next_run_at is before `before`."""
    for rows in _pages(conn, _OVERDUE_JOBS, {"before": before}, batch, max_pages):
        yield {job_id: next_run_at for job_id, next_run_at in rows}


def unfinished_jobs(conn: Any, batch: int, max_pages: int) -> Iterator[list[str]]:
    """Pages of the ids of jobs whose schedule is over (or max_runs reached) and that are not finished yet."""
    for rows in _pages(conn, _UNFINISHED_JOBS, {}, batch, max_pages):
        yield [row[0] for row in rows]


def awaiting_dispatch(
    conn: Any, stale: datetime, ahead: datetime, batch: int, max_pages: int
) -> Iterator[list[AwaitingDispatch]]:
    """Pages of runs queued since before `stale`, and of retries due before `stale` or after `ahead`."""
    for rows in _pages(conn, _AWAITING_DISPATCH, {"stale": stale, "ahead": ahead}, batch, max_pages):
        yield [AwaitingDispatch(*row) for row in rows]


def long_running(conn: Any, before: datetime, batch: int, max_pages: int) -> Iterator[list[RunningAttempt]]:
    """Pages of attempts still running that started before `before`."""
    for rows in _pages(conn, _LONG_RUNNING, {"before": before}, batch, max_pages):
        yield [RunningAttempt(started_execution(row), row[-1]) for row in rows]


@dataclass(frozen=True)
class Budget:
    """Until when retention may go on deleting: `until` on `clock` (seconds, any origin)."""

    until: float
    clock: Callable[[], float] = time.monotonic

    def spent(self) -> bool:
        return self.clock() >= self.until


def prune_executions(conn: Any, cutoff: datetime, batch: int, budget: Budget) -> int:
    """Delete finished runs created before `cutoff`, oldest first, `batch` rows per statement; returns how many."""
    return delete_in_batches(conn, _PRUNE, {"cutoff": cutoff}, batch, budget)


def prune_history(conn: Any, tenant_id: str, keep: int, batch: int, budget: Budget) -> int:
    """Delete the tenant's finished runs past its newest `keep` (unfinished ones stay, and count), oldest
    first, until done or the budget is spent; returns how many."""
    boundary = conn.execute(_HISTORY_BOUNDARY, {"tenant_id": tenant_id, "keep": keep}).fetchone()
    if boundary is None:
        return 0
    params = {"tenant_id": tenant_id, "scheduled_for": boundary[0], "id": boundary[1]}
    return delete_in_batches(conn, _PRUNE_HISTORY, params, batch, budget)


def delete_in_batches(conn: Any, sql: str, params: dict[str, Any], batch: int, budget: Budget) -> int:
    """Run a retention DELETE (taking `params` and `limit`) until it deletes less than a batch or the budget
    is spent. The budget is read after each statement: every call deletes a batch at least. A statement that
    answers a row (a delete counted in storage, tickwork.store.storage.tracked) answers how many it deleted."""
    deleted = 0
    while True:
        cursor = conn.execute(sql, {**params, "limit": batch})
        count = int(cursor.fetchone()[0]) if cursor.description else cursor.rowcount
        deleted += count
        if count < batch or budget.spent():
            return deleted
