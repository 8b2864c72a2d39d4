"""SQL of the maintenance task: rows the reconciler and the sweeper look at, and the retention delete.

Every read walks its rows by id in pages (keyset: no long-running cursor, no row left behind because an
earlier page is still stuck); the sweeper's reads stop after `max_pages` so one run stays short.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, Iterator

_FIRST_ID = "00000000-0000-0000-0000-000000000000"
# Every query below orders by the uuid column itself, never by its text form, to match `id > after`.

# What an active job's index entry depends on, besides its schedule (which only changes with the version).
_ACTIVE_JOBS = """
SELECT id::text, version, catchup, catchup_window_seconds FROM jobs
 WHERE status = 'active' AND id > %(after)s::uuid
 ORDER BY jobs.id LIMIT %(limit)s
"""

_ACTIVE_AMONG = "SELECT id::text FROM jobs WHERE id = ANY(%(ids)s::uuid[]) AND status = 'active'"

# Active jobs whose recorded next slot is already old: normally none, since recording a slot advances
# next_run_at in the same statement; the reconciler checks these against the due index.
_OVERDUE_JOBS = """
SELECT id::text, next_run_at FROM jobs
 WHERE status = 'active' AND next_run_at < %(before)s AND id > %(after)s::uuid
 ORDER BY jobs.id LIMIT %(limit)s
"""

# Runs waiting for a dispatch that may have been lost: queued for a while, or a retry that is overdue
# (or still ahead, in case the index lost it). Retries due right now are being dispatched: left alone.
_AWAITING_DISPATCH = """
SELECT id::text, attempt_count + 1, next_attempt_at FROM executions
 WHERE status IN ('queued', 'retrying') AND id > %(after)s::uuid
   AND ((status = 'queued' AND created_at < %(stale)s)
        OR (status = 'retrying' AND (next_attempt_at < %(stale)s OR next_attempt_at > %(ahead)s)))
 ORDER BY executions.id LIMIT %(limit)s
"""

# Attempts running since before `before`; the caller compares each with its own request timeout.
_LONG_RUNNING = """
SELECT e.id::text, e.attempt_count, coalesce(e.attempt_started_at, e.started_at), j.request, j.retry
  FROM executions e JOIN jobs j ON j.id = e.job_id
 WHERE e.status = 'running' AND coalesce(e.attempt_started_at, e.started_at) < %(before)s
   AND e.id > %(after)s::uuid
 ORDER BY e.id LIMIT %(limit)s
"""

# Finished runs only (a list of final states, so a new unfinished state is never deleted by omission);
# attempts go with them (ON DELETE CASCADE). SKIP LOCKED: never wait behind a writer.
_PRUNE = """
DELETE FROM executions WHERE id IN (
    SELECT id FROM executions
     WHERE created_at < %(cutoff)s AND status IN ('succeeded', 'failed', 'skipped', 'missed', 'lost')
     LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
"""


@dataclass(frozen=True)
class ActiveJob:
    id: str
    version: int
    catchup: str
    catchup_window_seconds: int


@dataclass(frozen=True)
class AwaitingDispatch:
    execution_id: str
    attempt: int
    next_attempt_at: datetime | None  # None for a queued first attempt


@dataclass(frozen=True)
class RunningAttempt:
    execution_id: str
    attempt: int
    started_at: datetime
    request: dict[str, Any]
    retry: dict[str, Any]


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


def active_jobs(conn: Any, batch: int) -> Iterator[list[ActiveJob]]:
    """Every active job, a page at a time."""
    for rows in _pages(conn, _ACTIVE_JOBS, {}, batch, None):
        yield [ActiveJob(*row) for row in rows]


def active_among(conn: Any, job_ids: list[str]) -> set[str]:
    """Which of these jobs are active."""
    return {row[0] for row in conn.execute(_ACTIVE_AMONG, {"ids": job_ids})}


def overdue_jobs(conn: Any, before: datetime, batch: int, max_pages: int) -> Iterator[dict[str, datetime]]:
    """Pages of {job id: next_run_at} for active jobs whose next_run_at is before `before`."""
    for rows in _pages(conn, _OVERDUE_JOBS, {"before": before}, batch, max_pages):
        yield {job_id: next_run_at for job_id, next_run_at in rows}


def awaiting_dispatch(
    conn: Any, stale: datetime, ahead: datetime, batch: int, max_pages: int
) -> Iterator[list[AwaitingDispatch]]:
    """Pages of runs queued since before `stale`, and of retries due before `stale` or after `ahead`."""
    for rows in _pages(conn, _AWAITING_DISPATCH, {"stale": stale, "ahead": ahead}, batch, max_pages):
        yield [AwaitingDispatch(*row) for row in rows]


def long_running(conn: Any, before: datetime, batch: int, max_pages: int) -> Iterator[list[RunningAttempt]]:
    """Pages of attempts still running that started before `before`."""
    for rows in _pages(conn, _LONG_RUNNING, {"before": before}, batch, max_pages):
        yield [RunningAttempt(*row) for row in rows]


def prune_executions(conn: Any, cutoff: datetime, batch: int, max_batches: int) -> int:
    """Delete finished runs created before `cutoff`, `batch` rows per statement; returns how many."""
    deleted = 0
    for _ in range(max_batches):
        count = conn.execute(_PRUNE, {"cutoff": cutoff, "limit": batch}).rowcount
        deleted += count
        if count < batch:
            break
    return deleted
