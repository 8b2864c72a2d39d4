"""The plain sending strategy: a group's runs readied in parallel, sent in instant order, awaited in parallel.

A group's writes happen in one thread, in instant order, so a burst of runs due together leaves within
a few milliseconds instead of queueing behind each other's responses. No write waits for its target
(tickwork.http.delivery: what a socket does not take at once is written while the response is awaited),
and the runs of one instant are written in random order: the poller hands them over by job id, which a
tenant could choose to go first.
"""
from __future__ import annotations

import contextlib
import random
import threading
from concurrent.futures import Executor, Future, wait
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tickwork.interfaces import Attempt, Group, Result, Results, RunSteps
from tickwork.models import Dispatch, StartedExecution
from tickwork.runs.pool import ElasticPool
from tickwork.vocab import NotStarted

# Runs grouped in one invocation (a burst) get ready and await their responses within this many threads.
MAX_PARALLEL_SENDS = 50


class BoundedSender:
    """The Sender of a Lambda environment: up to `width` threads per group, nothing shared between groups.

    For a runtime that runs many groups in one process (tickwork_local), BoundedSender and Sending are
    made to be extended: `writing` (around one instant's writes) and `before_reading` (before each
    response is read) are where it coordinates its groups, and a Sending subclass may read responses its
    own way (`_read_later`). In Lambda they do nothing.
    """

    def __init__(self, width: int = MAX_PARALLEL_SENDS) -> None:
        self.width = width

    def send(self, steps: RunSteps, group: Group, results: Results) -> None:
        Sending(self, steps, group, results).run()

    def writing(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def before_reading(self) -> None:
        return None

    def close(self) -> None:
        return None


@dataclass
class Slot:
    """One run of a group, between getting ready and being sent: whichever of its preparation and its
    instant comes last sends it."""

    dispatch: Dispatch
    run: StartedExecution
    prepared: Attempt | None = None
    due: bool = False
    dropped: bool = False  # its job was stopped before its instant: never sent
    sent_at: datetime | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


class Sending:
    """One group being sent: its slots and its threads, for as long as `BoundedSender.send` runs. A
    runtime's sender may subclass it (see BoundedSender)."""

    def __init__(self, sender: BoundedSender, steps: RunSteps, group: Group, results: Results) -> None:
        self.sender = sender
        self.steps = steps
        self.group = group
        self.results = results
        self.slots = [Slot(dispatch, run) for dispatch, run in _shuffled_within_instants(group.ahead)]
        self.pool: Executor | None = None  # the threads readying and reading the group's runs, while it runs

    def run(self) -> None:
        # Threads per invocation: kept per environment instead, they measured slower in the local runtime.
        # Up to `width` at once, and one more for each run blocked on its target, so no run waits for
        # another's target (tickwork.runs.pool).
        runs = max(1, len(self.group))
        with ElasticPool(min(self.sender.width, runs), most=runs, name="send") as pool:
            self.run_on(pool, pool)

    def run_on(self, pool: Executor, guarded: Executor) -> None:
        """Ready the runs and read their responses on `pool`, judge those at their instant on `guarded`,
        send in instant order on this thread; return once every run is handed over."""
        self.pool = pool
        futures = [pool.submit(self._prepare, slot) for slot in self.slots]
        futures += [guarded.submit(self._run_guarded, d) for d in self.group.at_instant]
        futures += self._send_in_order()
        _wait_all(futures)

    def _send_in_order(self) -> list[Future[Any]]:
        """At each instant, send the runs due then that are ready; a run still getting ready is sent by
        its preparation as soon as that ends. Responses are awaited only once the instant's runs are out.
        Runs whose job was paused or deleted lately wait for the others, and for `steps.drop_stopped`."""
        futures: list[Future[Any]] = []
        i = 0
        while i < len(self.slots):
            instant = self.slots[i].dispatch.fire_at_ms
            end = next((j for j in range(i, len(self.slots)) if self.slots[j].dispatch.fire_at_ms != instant),
                       len(self.slots))
            due = self.slots[i:end]
            self.steps.wait_until(instant)
            held = self.steps.stopped_lately([slot.run for slot in due])
            with self.sender.writing():
                sent = [slot for slot in due if slot.run.id not in held and self._due(slot)]
            if held:
                sent += self._judge([slot for slot in due if slot.run.id in held])
            # Runs with some of their request left to write (tickwork.http.delivery) get threads first.
            sent.sort(key=_answer_awaited)
            futures += [self._read_later(slot) for slot in sent]
            i = end
        return futures

    def _due(self, slot: Slot) -> bool:
        """Its instant has come: send it if ready (True); otherwise its preparation sends it when it ends."""
        with slot.lock:
            slot.due, ready = True, slot.prepared is not None
        if ready:
            self._send(slot)
        return ready

    def _judge(self, held: list[Slot]) -> list[Slot]:
        """Drop the runs held back that their job no longer makes, send the others; returns those sent."""
        dropped = self.steps.drop_stopped([slot.run for slot in held])
        for slot in held:
            if slot.run.id in dropped:
                with slot.lock:
                    slot.dropped, prepared = True, slot.prepared
                if prepared is not None:
                    prepared.abandon()
                self.results.not_started(slot.dispatch, NotStarted.SKIPPED)
        with self.sender.writing():
            return [slot for slot in held if slot.run.id not in dropped and self._due(slot)]

    def _read_later(self, slot: Slot) -> Future[Any]:
        """Await and read a sent run's response on one of the group's threads."""
        assert self.pool is not None
        return self.pool.submit(self._complete, slot)

    def _prepare(self, slot: Slot) -> None:
        prepared = self.steps.prepare(slot.run)
        self.steps.connect(prepared, slot.dispatch.fire_at_ms)
        with slot.lock:
            slot.prepared, late, dropped = prepared, slot.due, slot.dropped
        if dropped:
            prepared.abandon()
        elif late:
            self._send(slot)
            self._complete(slot)

    def _send(self, slot: Slot) -> None:
        assert slot.prepared is not None
        slot.sent_at = self.steps.fire(slot.prepared)

    def _complete(self, slot: Slot) -> None:
        assert slot.prepared is not None and slot.sent_at is not None
        slot.prepared.finish_write()  # a write, not reading: other groups' writes need not go first
        self.sender.before_reading()
        self.results.put(Result(slot.run, slot.sent_at, slot.prepared.complete()))

    def _run_guarded(self, dispatch: Dispatch) -> None:
        result = self.steps.run_guarded(dispatch)
        if isinstance(result, str):
            self.results.not_started(dispatch, result)
        else:
            self.results.put(result)


def _shuffled_within_instants(
    ahead: list[tuple[Dispatch, StartedExecution]],
) -> list[tuple[Dispatch, StartedExecution]]:
    """The runs in instant order, those of one instant in random order (got ready and written in it)."""
    runs = random.sample(ahead, len(ahead))
    runs.sort(key=lambda pair: pair[0].fire_at_ms)
    return runs


def _answer_awaited(slot: Slot) -> bool:
    """Whether a sent run has only its answer to await (not more to write, nor a failure to report)."""
    assert slot.prepared is not None
    return slot.prepared.awaiting()[0] is not None


def _wait_all(futures: list[Future[Any]]) -> None:
    """Wait for every task, futures added by callbacks included, and re-raise the first failure."""
    wait(futures)
    for future in futures:
        future.result()
