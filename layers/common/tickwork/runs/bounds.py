"""Retries bounded by their job's next slot: a retry the policy would place after the next run fails the
run instead, unless the policy allows it (`past_next_run`). The executor and the sweeper bound theirs the
same way, reading Postgres only for the retries that need the next slot.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, Callable, ContextManager, Sequence, TypeVar

from tickwork.errors import ScheduleError
from tickwork.rules import retry
from tickwork.store import maintenance as maintenance_store

T = TypeVar("T")
# What a retry to bound is: its job's retry policy, its decision, its job and its slot.
Retrying = tuple[dict[str, Any], retry.Decision, str, "datetime | None"]


def bounded(connect: Callable[[], ContextManager[Any]], items: Sequence[T], retrying: Callable[[T], Retrying],
            bound: Callable[[T, datetime | None], T]) -> list[T]:
    """`items` with `bound(item, next slot)` applied to each whose retry needs its job's next slot; a
    connection (`connect()`) is taken only when one does."""
    needing = [i for i, item in enumerate(items) if needs_next_slot(*retrying(item)[:2])]
    if not needing:
        return list(items)
    with connect() as conn:
        slots = next_slots(conn, [retrying(items[i])[2:] for i in needing])
    out = list(items)
    for i, slot in zip(needing, slots):
        out[i] = bound(items[i], slot)
    return out


def needs_next_slot(policy: dict[str, Any], decision: retry.Decision) -> bool:
    return retry.needs_next_slot(retry.RetryPolicy.from_dict(policy), decision)


def next_slots(conn: Any, runs: Sequence[tuple[str, datetime | None]]) -> list[datetime | None]:
    """For each (job id, slot): the job's first slot after it, None for a job no longer active. One read."""
    rows = {row.id: row for row in maintenance_store.index_rows(conn, [job_id for job_id, _ in runs])}
    return [next_slot(rows.get(job_id), slot) for job_id, slot in runs]


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
