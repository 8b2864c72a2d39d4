"""One poller tick: claim what is due, record each slot once in Postgres, hand the new runs to executors.

Per batch the tick costs two Redis round trips (fetch, claim) and one Postgres statement, whatever the
number of jobs in it, and one more Redis call for its runs' places among their tenants' runs in flight
(tickwork.dispatch.budget; the statement returns the new runs' tenants); a batch with retries or manual runs
reads theirs (one more statement), and one of each again when some are held back. The Redis claim only decides
who advances a job's score; the
unique execution row decides who dispatches, so two pollers at once never run a slot twice. With several
due-index shards (tickwork.dueindex.shards) a tick claims each in a thread of its own, at that cost per shard;
how far ahead it claims grows for the seconds many runs share (tickwork.rules.lookahead). An entry whose handling
raises is quarantined and the others go on (tickwork.dispatch.quarantine has the contract).
"""
from __future__ import annotations

import functools
import math
import time
import uuid
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Protocol, Sequence

from aws_lambda_powertools import Logger

from tickwork import metrics
from tickwork.dispatch.backlog import BacklogShares, Cursor
from tickwork.dispatch import calendars as calendar_cache
from tickwork.dispatch.budget import Budgets
from tickwork.dispatch.planning import plan_batch
from tickwork.dispatch.quarantine import Quarantine, isolated
from tickwork.dispatch.recording import Recorder
from tickwork.dispatch.result import TickResult
from tickwork.dueindex.entries import DueEntry, job_member
from tickwork.dueindex.index import DueIndex
from tickwork.dueindex.inflight import InFlight
from tickwork.dueindex.reconcile import StepLimits, index_jobs, rebuild_step
from tickwork.dueindex.relayout import relayout
from tickwork.dueindex.shard import Shard
from tickwork.errors import ConfigurationError
from tickwork.interfaces import Invoker
from tickwork.models import Dispatch
from tickwork.rules import lookahead
from tickwork.rules.policy import LATENESS_TOLERANCE_MS
from tickwork.rules.quarantine import Failure, Step, reason
from tickwork.settings import Settings
from tickwork.store import executions as executions_store
from tickwork.timeutil import from_ms, rfc3339

logger = Logger(child=True)
# A tick's batch writes in flight, each with the jobs it records.
Writes = deque[tuple[Future["TickResult"], frozenset[str]]]

# A tick stops after this many batches so one overloaded second cannot starve the next tick.
MAX_BATCHES_PER_TICK = 100
# Batches whose Postgres write runs while the next batch is fetched and claimed. The write is a tick's
# slowest step; two at once let Postgres use a second core. A tick failing mid-way leaves at most this
# many batches claimed in Redis but unrecorded, which maintenance rewinds (reconcile.rewind_unrecorded_claims).
RECORDS_IN_FLIGHT = 2
# Where in each second the loop ticks (see tick_point): half a second away from the whole seconds that
# schedules fire on, where executors send.
TICK_OFFSET_MS = 500
# How long a tick may spend rebuilding a lost index before it dispatches what is indexed so far: well
# inside the 900 ms tick lock, leaving room for the tick's own batches. The rest waits for the next tick.
REBUILD_SECONDS = 0.4
# How long a tick may spend planning its batches (decoding specs, catch-up decisions), all shards
# together: inside the 900 ms tick lock, and far inside the poller's 10 s timeout, however costly the
# schedules of the jobs due. Entries left unplanned are not claimed: they stay due for the next tick.
PLAN_SECONDS = 0.5


@dataclass(frozen=True)
class Batch:
    """What claiming one batch left to do: whether to go on claiming, the won slots to record, the won
    dispatches (retries, manual runs: recorded already), and the entries no claim moves (unknown kinds)."""

    more: bool
    slots: list[executions_store.Slot]
    dispatches: list[Dispatch]
    left: list[DueEntry]


@functools.lru_cache(maxsize=1)
def _record_pool() -> ThreadPoolExecutor:
    """Threads for batch writes, made once per execution environment."""
    return ThreadPoolExecutor(max_workers=RECORDS_IN_FLIGHT, thread_name_prefix="record")


@functools.lru_cache(maxsize=4)
def _shard_pool(width: int) -> ThreadPoolExecutor:
    """Threads claiming shards at once (one each), made once per execution environment."""
    return ThreadPoolExecutor(max_workers=width, thread_name_prefix="shard")


def _all_results(futures: list[Future[bool]]) -> list[bool]:
    """Every future's result once all are done; the first failure is raised after the others end."""
    wait(futures)
    return [future.result() for future in futures]


class Clients(Protocol):
    """What a tick uses of its execution environment's clients (tickwork.wiring.Services has them)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def db(self) -> Any: ...  # psycopg_pool.ConnectionPool
    @property
    def index(self) -> DueIndex: ...
    @property
    def in_flight(self) -> InFlight: ...
    @property
    def invoker(self) -> Invoker | None: ...


class Poller:
    def __init__(
        self, clients: Clients, rebuild: StepLimits = StepLimits(REBUILD_SECONDS), plan_seconds: float = PLAN_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`clock` (seconds, monotonic) times the tick's planning budget of `plan_seconds`."""
        if clients.invoker is None:
            # Refuse before claiming anything: claimed runs with nowhere to go would wait for the sweeper.
            raise ConfigurationError("EXECUTOR_FUNCTION_NAME is not set: the poller has no executor to dispatch to")
        self.settings = clients.settings
        self.db = clients.db
        self.index = clients.index
        self.rebuild = rebuild
        self.plan_seconds = plan_seconds
        self.clock = clock
        self._plan_deadline = math.inf
        self._shares = BacklogShares(self.settings.backlog_per_tenant)
        self.budgets = Budgets(self.settings, self.index, clients.in_flight)
        self.calendars = calendar_cache.shared
        self.quarantine = Quarantine(self.db, self.index)
        self.recorder = Recorder(self.db, clients.invoker, self.budgets, self.quarantine)

    def _out_of_time(self) -> bool:
        return self.clock() >= self._plan_deadline

    def tick(self, now_ms: int, second: int | None = None) -> TickResult:
        """Claim and dispatch what is due; with `second`, only if no poller ticked that second yet."""
        token = uuid.uuid4().hex
        locked, stored_shards = self.index.acquire_tick(token, self.settings.tick_lock_ms, now_ms, second)
        if not locked:
            return TickResult(locked=False, redis_round_trips=1)
        result = TickResult(locked=True, redis_round_trips=1)
        self._plan_deadline = self.clock() + self.plan_seconds
        self._shares = BacklogShares(self.settings.backlog_per_tenant)
        try:
            if stored_shards != self.index.count:
                result.relayout_from = relayout(self.index, stored_shards).previous
            self._drain(now_ms, result)
        finally:
            self.index.release_tick_lock(token)
            result.redis_round_trips += 1
        return result

    def _drain(self, now_ms: int, result: TickResult) -> None:
        """Claim every shard (concurrently when there are several); rebuild the shards found lost once
        the others are claimed, then claim what those have indexed so far."""
        lost = self._drain_shards(range(self.index.count), now_ms, result, check_intact=True)
        if lost:
            self._rebuild(now_ms, result, lost)
            self._drain_shards(lost, now_ms, result, check_intact=False)

    def _drain_shards(self, numbers: Sequence[int], now_ms: int, result: TickResult, check_intact: bool) -> list[int]:
        """Drain these shards into `result`; returns those whose marker was missing (not drained)."""
        if len(numbers) == 1:
            return [n for n in numbers if self._drain_shard(self.index.shards[n], now_ms, result, check_intact)]
        parts = [TickResult(locked=True) for _ in numbers]
        pool = _shard_pool(len(numbers))
        futures = [pool.submit(self._drain_shard, self.index.shards[n], now_ms, part, check_intact)
                   for n, part in zip(numbers, parts)]
        lost = [n for n, future in zip(numbers, _all_results(futures)) if future]
        for part in parts:
            result.absorb(part)
        return lost

    def _drain_shard(self, shard: Shard, now_ms: int, result: TickResult, check_intact: bool) -> bool:
        """Claim and record a shard's due batches, its on-time slots first, then its backlog (tenants'
        fair shares); True (and nothing claimed) if its marker is missing."""
        writes: Writes = deque()
        try:
            lost, backlog = self._drain_on_time(shard, now_ms, result, check_intact, writes)
            if backlog and not lost and self._drain_backlog(shard, now_ms, result, writes):
                self._drain_on_time(shard, now_ms, result, False, writes)  # slots the backlog's claims moved to
            return lost
        finally:
            self._collect_all(writes, result)

    def _drain_on_time(self, shard: Shard, now_ms: int, result: TickResult, check_intact: bool,
                       writes: Writes) -> tuple[bool, int]:
        """Claim what is due from the lateness tolerance ago to the horizon; returns whether the marker is
        missing, and how many entries are older (the backlog). A page that only holds entries no claim moves
        (unknown kinds) is fetched past (`cursor`), so any number of them never hides what is due behind them."""
        settings = self.settings
        horizon, on_time = now_ms + settings.lookahead_ms, now_ms - LATENESS_TOLERANCE_MS
        first_ms, seconds = lookahead.seconds_ahead(now_ms, settings.lookahead_ms, settings.max_lookahead_ms)
        backlog, cursor = 0, Cursor(on_time)
        while result.batches < MAX_BATCHES_PER_TICK and not self._out_of_time():
            page = shard.fetch_page(horizon, settings.batch_size, first_ms, seconds, cursor.score, cursor.passed)
            result.redis_round_trips += 1
            backlog = page.older if cursor.score == on_time else backlog
            if not page.intact and check_intact:
                return True, 0
            if seconds:  # the first fetch counts what is coming: that sets the horizon of the others
                extended, seconds = self._horizon(now_ms, first_ms, page.counts), 0
                horizon, nothing_yet = extended, not page.entries and extended > horizon
                if nothing_yet:
                    continue  # nothing due within the base lookahead, but a heavy second is coming
            if not page.entries:
                break
            batch = self._claim_and_record(shard, page.entries, now_ms, result, writes)
            if not batch.more and not batch.left:
                break  # everything left was claimed by someone else
            if not batch.more:
                cursor = cursor.past(page.entries, batch.left)
        return False, backlog

    def _drain_backlog(self, shard: Shard, now_ms: int, result: TickResult, writes: Writes) -> bool:
        """Claim the slots older than the lateness tolerance, oldest first, each tenant within its share of
        the tick (tickwork.dispatch.backlog): at most MAX_BATCHES_PER_TICK pages, claimed or not. Returns
        whether it claimed any."""
        before, cursor, claimed = f"({now_ms - LATENESS_TOLERANCE_MS}", Cursor(), result.claimed
        for _ in range(MAX_BATCHES_PER_TICK):
            if result.batches >= MAX_BATCHES_PER_TICK or self._out_of_time():
                break
            page = shard.fetch_page(before, self.settings.batch_size, min_score=cursor.score, offset=cursor.passed)
            result.redis_round_trips += 1
            if not page.entries:
                break
            taken = self._shares.take(page.entries)
            cursor = cursor.after(page.entries, taken)
            result.deferred += len(page.entries) - len(taken)
            if taken and not self._claim_and_record(shard, taken, now_ms, result, writes).more:
                break
        return result.claimed > claimed

    def _claim_and_record(self, shard: Shard, entries: list[DueEntry], now_ms: int, result: TickResult,
                          writes: Writes) -> Batch:
        """Claim a batch and start writing what it won."""
        result.batches += 1
        batch = self._claim_batch(shard, entries, now_ms, result)
        slots, dispatches = batch.slots, batch.dispatches
        jobs = frozenset(slot.job_id for slot in slots)
        # A lookahead can claim two slots of one job in one tick, in two batches. Postgres must
        # record them in the order Redis claimed them, or the later one, written first, takes the
        # earlier for a lost claim: so a batch holding a job still being written waits for it.
        while writes and (len(writes) >= RECORDS_IN_FLIGHT or any(jobs & held for _, held in writes)):
            self._collect(writes.popleft()[0], result)
        writes.append((_record_pool().submit(self._record_and_dispatch, slots, dispatches, now_ms), jobs))
        return batch

    def _horizon(self, now_ms: int, first_ms: int, counts: list[int]) -> int:
        settings = self.settings
        return lookahead.horizon_ms(now_ms, settings.lookahead_ms, settings.max_lookahead_ms,
                                    settings.prepare_runs_per_second, first_ms, counts, self.index.count)

    def _claim_batch(self, shard: Shard, entries: list[DueEntry], now_ms: int, result: TickResult) -> Batch:
        """Plan and claim one batch, its entries that raised set aside (tickwork.dispatch.quarantine)."""
        resolved = self.calendars.resolve(self.db, entries)
        plan = plan_batch(entries, now_ms, self._out_of_time, resolved.calendars, resolved.unreadable)
        result.unplanned += plan.unplanned
        result.unknown += len(plan.unknown)
        failed = plan.failed + (self._repair_specs(plan.missing_specs, entries, now_ms) if plan.missing_specs else [])
        if failed:
            self.calendars.forget(plan.failed_calendars)
            result.quarantined += self.quarantine.set_aside(failed, now_ms)
        won = shard.claim([claim for claim, _ in plan.claims])
        result.redis_round_trips += 1 if plan.claims else 0
        result.claimed += sum(won)
        targets = [target for (_, target), w in zip(plan.claims, won) if w]
        dispatches = [t for t in targets if isinstance(t, Dispatch)]
        slots = [t for t in targets if isinstance(t, executions_store.Slot)]
        return Batch(any(won) or bool(plan.missing_specs) or bool(failed), slots, dispatches, plan.unknown)

    def _record_and_dispatch(
        self, slots: list[executions_store.Slot], dispatches: list[Dispatch], now_ms: int,
    ) -> TickResult:
        """Record won slots, hand the runs their tenants' budgets admit to executors (tickwork.dispatch.recording);
        returns what that counted for the tick."""
        return self.recorder.write(slots, dispatches, now_ms)

    def _collect(self, write: Future[TickResult], result: TickResult) -> None:
        result.absorb(write.result())

    def _collect_all(self, writes: Writes, result: TickResult) -> None:
        """Wait for every write of the tick; the first failure is raised once none is left running."""
        failure: BaseException | None = None
        for write, _ in writes:
            try:
                self._collect(write, result)
            except BaseException as exc:  # noqa: BLE001 - re-raised below, after the other writes
                failure = failure or exc
        writes.clear()
        if failure is not None:
            raise failure

    def _rebuild(self, now_ms: int, result: TickResult, shards: list[int]) -> None:
        """Redis lost these shards (or never had them): go on rebuilding them from Postgres for a bounded
        time; the tick then claims what is indexed so far."""
        with self.db.connection() as conn:
            report = rebuild_step(conn, self.index, from_ms(now_ms), self.rebuild, shards)
        result.rebuilt, result.reindexed, result.rebuild_ms = True, report.indexed, round(report.seconds * 1000)
        logger.warning("due index marker missing: rebuilding it from Postgres",
                       extra={**report.__dict__, "shards": shards})

    def _repair_specs(self, job_ids: list[str], entries: list[DueEntry], now_ms: int) -> list[Failure]:
        """The index lost a job's spec (Redis failover): restore it from Postgres, or drop a dead job. Returns
        the jobs whose restore raised, to set aside."""
        with self.db.connection() as conn:
            done = isolated(job_ids, lambda ids: index_jobs(conn, self.index, list(ids), from_ms(now_ms)))
        logger.warning("restored missing job specs from Postgres", extra={"count": len(job_ids)})
        scores = {entry.member: entry.score for entry in entries} if done.failed else {}
        return [Failure(job_member(job_id), scores.get(job_member(job_id)), reason(Step.SPEC, error), job_id=job_id)
                for job_id, error in done.failed]


def tick_point(now: float) -> float:
    """The point of its second a tick invoked at `now` claims as of: TICK_OFFSET_MS past the second it
    was invoked in, or `now` when that is past.

    Schedules fire on whole seconds; claiming half a second off them, with a 1.5 s lookahead, hands every
    slot to an executor 1.5 s before its instant as of that point. The local runtime ticks at that point.
    The Step Functions loop cannot: its Wait ends on a whole second (it drops a Timestamp's
    milliseconds), so its tick runs right after, up to TICK_OFFSET_MS before its point, and claims the same
    slots as of it. The executors then hold those runs up to half a second longer (and only when there
    are runs), instead of the poller's Lambda waiting half of every second, idle or not.
    """
    return max(now, math.floor(now) + TICK_OFFSET_MS / 1000)


def next_tick_at(now: float, ticked: int) -> str:
    """The second the loop's next tick belongs to, for the Step Functions Wait state's Timestamp, after a
    tick of second `ticked` that ended at `now`: a whole second (a Wait honours a Timestamp only to the
    second), after `ticked`, and no earlier than the first whose tick point is still ahead of `now`. A
    second already begun (a tick that ended past the next whole second, before its point) is in the past:
    the Wait continues at once and that second is ticked late, rather than not at all.
    """
    second = max(ticked + 1, math.floor(now - TICK_OFFSET_MS / 1000) + 1)
    return rfc3339(datetime.fromtimestamp(second, tz=timezone.utc)) or ""


def handle_tick(clients: Clients, clock: Callable[[], float]) -> dict[str, Any]:
    invoked = clock()
    second = math.floor(invoked)
    now_ms = int(tick_point(invoked) * 1000)
    poller = Poller(clients)
    # Per second, one tick works: two loops side by side (or a duplicated execution) wake for the same one.
    result = poller.tick(now_ms, second=second)
    if result.dispatched or result.missed:
        logger.info("tick dispatched runs", extra=result.as_dict())
    metrics.record_tick(result)
    backlog = None
    if result.locked:
        # What this tick left already due (one more Redis round trip, outside the tick's own count):
        # 0 while the poller keeps up; growing when ticks stop at MAX_BATCHES_PER_TICK or fail mid-way.
        backlog = poller.index.count_due(now_ms)
        metrics.record_backlog(backlog)
    metrics.flush()
    return {"next_tick_at": next_tick_at(clock(), second), **result.as_dict(), "due_backlog": backlog}
