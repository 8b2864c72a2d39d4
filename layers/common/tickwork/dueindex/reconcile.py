"""Make the Redis due index match Postgres, the source of truth, and undo claims that never reached it.

Two passes, neither of which ever moves a score already in the set (it may be a claim made since
Postgres was read: principle 2, a live job is never taken out to be put back later):

- **Rebuild**, when the marker is gone (a flush, a failover to an empty replica): every active job is
  written back at its Postgres next_run_at (a job in quarantine at its retry time, so a failover does not
  put a poison entry back in reach: tickwork.dispatch.quarantine), a page of jobs per round trip, in steps
  that each stop once their budget is spent. How far the rebuild got is kept in Redis (each shard's
  `Shard.rebuild_key`: shards are rebuilt each on its own), so the next
  step, in the next tick or maintenance pass, goes on from there; ticks dispatch what is indexed
  meanwhile. After each page, the jobs of the same stretch of ids that are not active are taken out
  (stopped before the loss, or paused or deleted while the page was written); the marker is set once
  the last page is done.
  Each page moves the position in the same script that writes it, and only from the position it was
  read at: a flush mid-rebuild (the position is gone too) makes the rest start over, never marks a
  partial index whole, and two rebuilders never both apply a page.
- **Reconcile**, the periodic pass while the marker is there: every active job compared with the
  index, and only what differs written.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Sequence

from aws_lambda_powertools import Logger

from tickwork.dueindex.index import DueIndex
from tickwork.dueindex.specs import IndexSpecs
from tickwork.errors import ScheduleError
from tickwork.schedule import specs as scheduling
from tickwork.store import maintenance as maintenance_store
from tickwork.store.maintenance import IndexRow
from tickwork.timeutil import to_ms

logger = Logger(child=True)

# Jobs per round trip: one Postgres page and one Redis script of this many takes ~10-30 ms.
PAGE = 2000
# Rewinding looks only at jobs whose claim went astray (normally none); this bounds one run's work.
BATCH = 1000
MAX_REWIND_BATCHES = 50
# Rebuild positions: past the job with this id (none yet: from the first), then every job done.
JOBS, END = "jobs", "end"
START = f"{JOBS}:"


@dataclass
class RebuildResult:
    indexed: int = 0  # jobs written: missing from the index, or indexed with an outdated spec
    removed: int = 0
    unparsable: int = 0
    complete: bool = False  # the index is whole (its marker set) after this call
    seconds: float = 0.0  # spent on rebuild pages, by the step's clock


@dataclass(frozen=True)
class StepLimits:
    """How long one rebuild step may go on, checked after each page (so every step makes progress)."""

    seconds: float
    page: int = PAGE
    clock: Callable[[], float] = time.monotonic


UNBOUNDED = StepLimits(math.inf)


def rebuild_index(conn: Any, index: DueIndex, now: datetime, limits: StepLimits = UNBOUNDED) -> RebuildResult:
    """Bring the index in line with Postgres: go on with the rebuild of every shard that is not whole (as
    far as `limits` allow), then compare it job by job (a spec that outlived the loss may be outdated)."""
    unbuilt = index.unbuilt()
    if not unbuilt:
        return reconcile_index(conn, index, now, limits.page)
    rebuilt = rebuild_step(conn, index, now, limits, unbuilt)
    if not rebuilt.complete:
        return rebuilt
    compared = reconcile_index(conn, index, now, limits.page)
    compared.indexed += rebuilt.indexed
    compared.removed += rebuilt.removed
    return compared


def rebuild_step(
    conn: Any, index: DueIndex, now: datetime, limits: StepLimits, shards: Sequence[int] | None = None,
) -> RebuildResult:
    """Go on with the rebuild of these shards (default: all; begin one where none is in progress) until
    each is complete, the budget is spent, or another rebuilder moved it on meanwhile. Shards at the same
    position (all of them, after a flush) share each Postgres page."""
    result = RebuildResult()
    started = limits.clock()
    specs = IndexSpecs()
    numbers = list(range(index.count)) if shards is None else list(shards)
    positions = {n: index.shards[n].rebuild_position(START) for n in numbers}
    completed = 0
    while positions:
        position = min(positions.values(), key=_order)
        group = [n for n, at in positions.items() if at == position]
        moved = _rebuild_page(conn, index, group, position, now, limits.page, specs, result)
        for n in group:
            following = moved.get(n)
            if following is None:
                completed += n in moved
                del positions[n]
            else:
                positions[n] = following
        result.seconds = limits.clock() - started
        if result.seconds >= limits.seconds:
            break
    result.complete = completed == len(numbers)
    return result


def _order(position: str) -> tuple[bool, str]:
    """Rebuild positions in the order a rebuild passes them: by job id, the marker step last."""
    phase, _, after = position.partition(":")
    return phase == END, after


def _rebuild_page(
    conn: Any, index: DueIndex, group: list[int], position: str, now: datetime, page: int,
    specs: IndexSpecs, result: RebuildResult,
) -> dict[int, str | None]:
    """Apply the page at `position` to each shard of `group`; returns each shard's next position (None
    when complete), leaving out the shards that refused it."""
    phase, _, after = position.partition(":")
    rows: list[IndexRow] = []
    last: str | None = None  # the page's last id; None: no job after it
    following: str | None = None  # the last step only sets the marker
    if phase != END:
        rows = maintenance_store.index_page(conn, after or None, page)
        last = rows[-1].id if len(rows) == page else None
        following = f"{JOBS}:{last}" if last else f"{END}:"
    puts, removals = _entries(rows, specs, now, result)
    moved: dict[int, str | None] = {}
    for n in group:
        added = index.shards[n].rebuild_page(
            position, following, [p for p in puts if index.number_of_job(p[0]) == n],
            [r for r in removals if index.number_of_job(r) == n], to_ms(now),
        )
        if added is None:
            logger.info("due index rebuild moved on elsewhere; this step stops",
                        extra={"position": position, "shard": n})
            continue
        result.indexed += added
        moved[n] = following
    if phase != END and moved:
        # Jobs paused or deleted since the page was read may have been put back just after their own
        # removal; and members of jobs that stopped before Redis lost its marker go too.
        gone = [job_id for job_id in maintenance_store.not_active_between(conn, after or None, last)
                if index.number_of_job(job_id) in moved]
        result.removed += len(_take_out(conn, index, gone, now, specs, result))
    return moved


def reconcile_index(conn: Any, index: DueIndex, now: datetime, page: int = PAGE) -> RebuildResult:
    """Make sure every active job is indexed with its current spec, and nothing else is.

    Only what differs is written, so this is cheap enough to run every minute. Jobs already in the set
    keep their score (the poller may have advanced it since Postgres was written); a job with no
    next_run_at gets its first future slot.
    """
    result = RebuildResult(complete=True)
    specs = IndexSpecs()
    for rows in maintenance_store.index_pages(conn, page):
        _reconcile_rows(conn, index, rows, now, specs, result)
    for job_ids in index.job_ids(page):
        dead = maintenance_store.not_active_among(conn, job_ids)
        result.removed += len(_take_out(conn, index, dead, now, specs, result))
    if result.indexed or result.removed or result.unparsable:
        logger.info("due index brought in line with Postgres", extra=result.__dict__)
    return result


def index_jobs(conn: Any, index: DueIndex, job_ids: list[str], now: datetime) -> RebuildResult:
    """Index these jobs as Postgres has them: active ones with their current spec (a score already in
    the set is kept), and the rest (paused, deleted, gone, or a stored schedule that no longer parses)
    taken out, so nothing unrunnable stays due."""
    result = RebuildResult()
    if job_ids:
        rows = maintenance_store.index_rows(conn, job_ids)
        active = {row.id for row in rows}
        index.take_out([job_id for job_id in job_ids if job_id not in active])
        _reconcile_rows(conn, index, rows, now, IndexSpecs(), result)
    return result


def _reconcile_rows(
    conn: Any, index: DueIndex, rows: Sequence[IndexRow], now: datetime, specs: IndexSpecs,
    result: RebuildResult,
) -> None:
    """Write the jobs of these rows that are missing from the index or indexed with another spec.

    Those that differ are read from Postgres again, after their index state: a spec the API wrote since
    the rows were read is then what Postgres says too, and a write only goes over the spec it compared
    with, so an older spec never replaces a newer one.
    """
    puts, removals = _entries(rows, specs, now, result)
    index.take_out(removals)
    states = index.job_states([job_id for job_id, _, _ in puts])
    seen = {job_id: state for (job_id, _, spec), state in zip(puts, states) if state[0] is None or state[1] != spec}
    if not seen:
        return
    fresh, _ = _entries(maintenance_store.index_rows(conn, list(seen)), specs, now, result)
    stale = [(job_id, score, spec, seen[job_id][1]) for job_id, score, spec in fresh
             if seen[job_id][0] is None or seen[job_id][1] != spec]
    index.put_jobs_if_unchanged(stale)
    result.indexed += len(stale)


def _take_out(
    conn: Any, index: DueIndex, dead: list[str], now: datetime, specs: IndexSpecs,
    result: RebuildResult,
) -> list[str]:
    """Take out jobs Postgres said were not active; returns those that were indexed. One resumed since
    may have been indexed by its resume just before: it is put back at its Postgres slot."""
    removed = index.take_out(dead)
    if removed:
        puts, _ = _entries(maintenance_store.index_rows(conn, removed), specs, now, result)
        index.put_jobs_if_unchanged([(job_id, score, spec, None) for job_id, score, spec in puts])
    return removed


def _entries(
    rows: Sequence[IndexRow], specs: IndexSpecs, now: datetime, result: RebuildResult,
) -> tuple[list[tuple[str, int, str]], list[str]]:
    """(job id, score, encoded spec) of each row to index, and the ids of those to leave out: a stored
    schedule that no longer parses, or no slot left."""
    puts: list[tuple[str, int, str]] = []
    removals: list[str] = []
    for row in rows:
        try:
            spec = specs.encoded(row)
            next_ms = row.next_run_ms if row.next_run_ms is not None else _first_slot_ms(row, now)
            if next_ms is not None and row.retry_ms is not None:
                next_ms = max(next_ms, row.retry_ms)  # in quarantine: out of the claimable range until then
        except ScheduleError:
            result.unparsable += 1
            logger.error("stored schedule no longer parses; job left out of the index", extra={"job_id": row.id})
            next_ms = None
        if next_ms is None:
            removals.append(row.id)
        else:
            puts.append((row.id, next_ms, spec))
    return puts, removals


def _first_slot_ms(row: IndexRow, now: datetime) -> int | None:
    first = scheduling.first_slot(scheduling.job_schedule(row), now)
    return None if first is None else to_ms(first)


def rewind_unrecorded_claims(conn: Any, index: DueIndex, before: datetime) -> int:
    """Undo claims that never reached Postgres: a poller died between the Redis claim and the insert.

    Such a job's next_run_at still names the claimed slot while its score has moved on; moving the score
    back makes the next tick record that slot (its catch-up policy decides run or missed). `before` must
    leave claims still in flight alone; rewinding one anyway is harmless, since Postgres refuses to
    record a slot twice. Returns how many jobs were moved back.
    """
    rewound = 0
    for page in maintenance_store.overdue_jobs(conn, before, BATCH, MAX_REWIND_BATCHES):
        rewound += index.rewind_jobs({job_id: to_ms(at) for job_id, at in page.items()})
    if rewound:
        logger.warning("rewound claims that never reached Postgres", extra={"jobs": rewound})
    return rewound
