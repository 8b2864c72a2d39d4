"""Retries bounded by their job: none for a run its job no longer makes (paused or deleted), and a retry
the policy would place after the next run fails the run instead, unless the policy allows it
(`past_next_run`). Every ending of an attempt bounds its retry this way (tickwork.runs.ending), reading
Postgres only when a run retries.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, ContextManager, Sequence, TypeVar

from tickwork.errors import ScheduleError
from tickwork.rules import retry
from tickwork.store import executions as executions_store
from tickwork.store import maintenance as maintenance_store

T = TypeVar("T")


@dataclass(frozen=True)
class Retrying:
    """A run's retry to bound: the run, its job and slot, the job's retry policy and what was decided."""

    run_id: str
    job_id: str
    slot: datetime | None
    policy: dict[str, Any]
    decision: retry.Decision


def bounded(connect: Callable[[], ContextManager[Any]], items: Sequence[T], retrying: Callable[[T], Retrying],
            bound: Callable[[T, retry.Bound], T]) -> list[T]:
    """`items` with `bound(item, what limits its retry)` applied to each that retries; a connection
    (`connect()`) is taken only when one does."""
    needing = [i for i, item in enumerate(items) if retrying(item).decision.next_attempt_at is not None]
    if not needing:
        return list(items)
    with connect() as conn:
        limits = job_bounds(conn, [retrying(items[i]) for i in needing])
    out = list(items)
    for i, limit in zip(needing, limits):
        out[i] = bound(items[i], limit)
    return out


def job_bounds(conn: Any, runs: Sequence[Retrying]) -> list[retry.Bound]:
    """For each retry: whether its job still makes the run (a job not active is read again: paused or
    deleted stops it, completed does not), and the job's next slot when its policy asks for it."""
    rows = {row.id: row for row in maintenance_store.index_rows(conn, [run.job_id for run in runs])}
    stopped = executions_store.stopped_runs(conn, [run.run_id for run in runs if run.job_id not in rows])
    limits = []
    for run in runs:
        slot = next_slot(rows.get(run.job_id), run.slot) if needs_next_slot(run.policy, run.decision) else None
        limits.append(retry.Bound(slot, stopped.get(run.run_id)))
    return limits


def needs_next_slot(policy: dict[str, Any], decision: retry.Decision) -> bool:
    return retry.needs_next_slot(retry.RetryPolicy.from_dict(policy), decision)


def next_slot(row: maintenance_store.IndexRow | None, after: datetime | None) -> datetime | None:
    """The job's first slot after the run's; None for a job no longer active (it has no next run)."""
    if row is None or after is None:
        return None
    # The schedule engine loads with the first retry bounded by its job's next slot, not with every executor.
    from tickwork.schedule.specs import job_schedule

    try:
        return job_schedule(row).next_after(after)
    except ScheduleError:
        return None
