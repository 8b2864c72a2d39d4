"""Lambda's asynchronous invocation at its worst, on purpose: the local runtime's chaotic Invoker.

What Lambda documents for an event sent with InvocationType=Event ("How Lambda handles errors and retries
with asynchronous invocation"), and what ChaoticInvoker does to a share of the events:

- its queue is eventually consistent: an event may run twice, late, and out of order (`duplicate`, `delay`);
- a throttled event (429) goes back to the queue and is tried again, 1 s later at first, then up to 5 minutes
  apart, until it is older than the function's maximum event age (template.yaml: 900 s), then dropped
  (`throttle`, `throttle_backoff_seconds`, `max_event_age_seconds`);
- a function error, a timeout included, is retried MaximumRetryAttempts times (template.yaml: 2), about 1 and
  then 2 minutes later, within the same age (`retries`, `retry_delay_seconds`);
- an invocation is killed at its timeout, wherever it is (`kill`).

Each event's fate is drawn from random.Random(seed) when the poller hands it over, always the same count of
draws, so a seed replays the same faults on the same sequence of events (the wall clock decides the rest).

A kill stops the invocation at a point of its own, before a write, after one, or after its work
(tickwork_local.kills says how, and why in-process); its execution environment (a thread) ends with it.
"""
from __future__ import annotations

import collections
import contextlib
import logging
import random
import threading
import time
from dataclasses import dataclass, field, fields, replace
from typing import Any, Callable, Sequence

from tickwork.dispatch.invoker import group_dispatches, wall_clock_ms
from tickwork.errors import ConfigurationError
from tickwork.models import Dispatch, executor_event
from tickwork_local.environments import Environments, EventQueue
from tickwork_local.executors import MAX_WORKERS
from tickwork_local.functions import LambdaFunction
from tickwork_local.kills import KILL_POINTS, Attempt, Kill, mortal_executors, planned

logger = logging.getLogger(__name__)

# A throttled delivery is refused 1 to this many times before it runs (or grows too old).
MAX_THROTTLES = 4
# Lambda's backoff between tries of a throttled event grows to this at most.
MAX_THROTTLE_BACKOFF_SECONDS = 300.0


@dataclass(frozen=True)
class Chaos:
    """How often each fault happens (shares of events or of invocations), and Lambda's timings."""

    seed: int
    duplicate: float = 0.1  # events delivered a second time
    delay: float = 0.1  # deliveries held back, up to max_delay_seconds
    max_delay_seconds: float = 2.0
    throttle: float = 0.05  # deliveries refused (429) 1 to MAX_THROTTLES times before they run
    kill: float = 0.05  # invocations killed mid-run, at one of kill_points
    kill_points: tuple[str, ...] = KILL_POINTS
    retries: int = 2  # template.yaml: the executor's MaximumRetryAttempts
    retry_delay_seconds: float = 60.0  # Lambda retries a function error after about 1, then 2, minutes
    throttle_backoff_seconds: float = 1.0  # a throttled event is tried again after 1 s, then twice as long
    max_event_age_seconds: float = 900.0  # template.yaml: the executor's MaximumEventAgeInSeconds

    def __post_init__(self) -> None:
        shares = {"duplicate": self.duplicate, "delay": self.delay, "throttle": self.throttle, "kill": self.kill}
        if any(not 0 <= share <= 1 for share in shares.values()):
            raise ConfigurationError(f"chaos shares must be between 0 and 1: {shares}")
        if not self.kill_points or not set(self.kill_points) <= set(KILL_POINTS):
            raise ConfigurationError(f"chaos kill_points must be among {', '.join(KILL_POINTS)}")
        if not 0 <= self.retries <= 2:
            raise ConfigurationError("chaos retries must be 0, 1 or 2, as Lambda's MaximumRetryAttempts")

    @classmethod
    def parse(cls, text: str) -> Chaos:
        """TICKWORK_LOCAL_CHAOS: a seed, then knob=value pairs if any (`7`, `7,kill=0.2,retry_delay_seconds=5`);
        kill_points are separated by '/'."""
        seed, *knobs = (part.strip() for part in text.split(","))
        defaults = {f.name: f.default for f in fields(cls) if f.name != "seed"}
        values: dict[str, Any] = {}
        try:
            for knob in knobs:
                name, _, raw = knob.partition("=")
                if name not in defaults:
                    raise ConfigurationError(f"unknown chaos knob {name!r}; known: {', '.join(defaults)}")
                kind = type(defaults[name])
                values[name] = tuple(raw.split("/")) if kind is tuple else kind(raw)
            return cls(int(seed), **values)
        except ValueError as exc:
            raise ConfigurationError(f"TICKWORK_LOCAL_CHAOS must be a seed, then knob=value pairs: {text!r}") from exc


@dataclass(frozen=True)
class Fate:
    """What Lambda's queue does with one delivery of an event."""

    delay: float = 0.0  # held back this long before its first try
    throttles: int = 0  # tries refused before one runs
    kills: tuple[str | None, ...] = ()  # for each run of the function (the first, then each retry): where it dies
    copy: Fate | None = None  # a second delivery of the same event


def draw_fate(rng: random.Random, chaos: Chaos) -> Fate:
    """One event's fate. The same count of numbers is drawn whatever they come to, so the n-th event of a
    seed always meets the same fate."""
    first = _draw_delivery(rng, chaos, always_late=False)
    copy = _draw_delivery(rng, chaos, always_late=True)  # a duplicate arrives after the event itself, or with it
    return replace(first, copy=copy) if rng.random() < chaos.duplicate else first


def _draw_delivery(rng: random.Random, chaos: Chaos, always_late: bool) -> Fate:
    late, delay = rng.random() < chaos.delay, rng.uniform(0.0, chaos.max_delay_seconds)
    throttled, throttles = rng.random() < chaos.throttle, rng.randint(1, MAX_THROTTLES)
    kills = []
    for _ in range(chaos.retries + 1):
        killed, point = rng.random() < chaos.kill, rng.choice(chaos.kill_points)
        kills.append(point if killed else None)
    return Fate(delay if late or always_late else 0.0, throttles if throttled else 0, tuple(kills))


@dataclass
class ChaosReport:
    """What the chaotic invoker did: counts, and what its kills left behind."""

    events: int = 0  # events the poller handed over (one invocation each)
    duplicated: int = 0  # events delivered a second time
    delayed: int = 0  # deliveries held back before their first try
    throttled: int = 0  # deliveries refused (429) at least once
    expired: int = 0  # throttled past the maximum event age: dropped
    runs: int = 0  # runs of the executor function, retries included
    errors: int = 0  # function errors other than kills
    retried: int = 0  # deliveries again after a function error (a kill included)
    discarded: int = 0  # function errors with no retry left: Lambda's failure destination
    deaths: list[tuple[Kill, dict[str, Any]]] = field(default_factory=list)  # each kill, with its event
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)  # guards the above

    def add(self, name: str, count: int = 1) -> None:
        with self.lock:
            setattr(self, name, getattr(self, name) + count)

    def handed_over(self, fate: Fate) -> None:
        deliveries = [one for one in (fate, fate.copy) if one is not None]
        with self.lock:
            self.events += 1
            self.duplicated += fate.copy is not None
            self.delayed += fate.delay > 0  # not its duplicate's: that one always comes at a moment of its own
            self.throttled += sum(one.throttles > 0 for one in deliveries)

    def died(self, kill: Kill, event: dict[str, Any]) -> None:
        with self.lock:
            self.deaths.append((kill, event))

    @property
    def killed(self) -> collections.Counter[str]:
        """Invocations killed, by where they died."""
        with self.lock:
            return collections.Counter(kill.point for kill, _ in self.deaths)

    @property
    def in_killed(self) -> set[Attempt]:
        """(run, attempt) of every dispatch of a killed invocation."""
        with self.lock:
            return {(d["execution_id"], d["attempt"]) for _, event in self.deaths for d in event["dispatches"]}

    @property
    def unsent(self) -> set[Attempt]:
        """Attempts a killed invocation started and stopped at their write: never sent."""
        with self.lock:
            return set().union(*(kill.left()[0] for kill, _ in self.deaths))

    @property
    def unrecorded(self) -> set[Attempt]:
        """Attempts a killed invocation wrote and never recorded: the crash window, where the sweeper ends
        them lost and a retry may send the run again."""
        with self.lock:
            return set().union(*(kill.left()[1] for kill, _ in self.deaths))

    def summary(self) -> str:
        deaths = self.killed
        killed = ", ".join(f"{point} {deaths[point]}" for point in KILL_POINTS)
        left = f"{len(self.unsent)} attempts stopped at their write, {len(self.unrecorded)} written and never recorded"
        with self.lock:
            return (f"{self.events} events: {self.duplicated} duplicated, {self.delayed} delayed, {self.throttled}"
                    f" throttled ({self.expired} expired); {self.runs} runs of the executor, killed {killed},"
                    f" {self.errors} other errors, {self.retried} retried, {self.discarded} discarded; {left}")


@dataclass(frozen=True)
class _Delivery:
    """One delivery of an event, as it goes through Lambda's queue."""

    event: dict[str, Any]
    fate: Fate
    queued_at: float  # when the event entered Lambda's queue: its age counts from here
    throttled: int = 0  # tries refused so far
    runs: int = 0  # runs of the function so far (it is retried after an error)


class ChaoticInvoker:
    """The Invoker of one process, as Lambda's asynchronous invocation may behave (see the module): events
    duplicated, delayed, throttled, retried after errors, invocations killed, each drawn from the seed."""

    def __init__(self, executor: LambdaFunction, chaos: Chaos, environments: int = MAX_WORKERS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.chaos = chaos
        self.report = ChaosReport()
        self._executor = executor
        self._clock = clock
        self._rng = random.Random(chaos.seed)
        self._rng_lock = threading.Lock()
        self._environments: Environments[_Delivery] = Environments(self._run, environments)
        self._queue: EventQueue[_Delivery] = EventQueue(self._due, clock)
        self._mortal = contextlib.ExitStack()
        self._mortal.enter_context(mortal_executors())
        logger.warning("executor invocations are chaotic on purpose (TICKWORK_LOCAL_CHAOS): %s", chaos)

    def invoke(self, dispatches: Sequence[Dispatch]) -> None:
        now = self._clock()
        for group in group_dispatches(dispatches, wall_clock_ms()):
            with self._rng_lock:  # fates drawn in hand-over order
                fate = draw_fate(self._rng, self.chaos)
            self.report.handed_over(fate)
            event = executor_event(group)
            for one in (fate, fate.copy):
                if one is not None:
                    self._queue.put(now + one.delay, _Delivery(event, one, now))

    def pending(self) -> int:
        """Deliveries not over yet: waiting in Lambda's queue (retries and duplicates included) or running."""
        return len(self._queue) + self._environments.pending()

    def close(self, grace_seconds: float) -> bool:
        """Drop what is not running yet (left `queued` for the sweeper) and wait a little for the rest; True
        when every invocation finished within the grace period."""
        self._queue.close()
        idle = self._environments.close(grace_seconds)
        self._mortal.close()
        return idle

    def _due(self, item: _Delivery) -> None:
        if item.throttled < item.fate.throttles:
            backoff = min(self.chaos.throttle_backoff_seconds * 2 ** item.throttled, MAX_THROTTLE_BACKOFF_SECONDS)
            self._again(replace(item, throttled=item.throttled + 1), backoff, "expired")
        else:
            self._environments.submit(item)

    def _again(self, item: _Delivery, after: float, otherwise: str) -> None:
        """Back in the queue `after` seconds from now, unless the event is too old by then (counted as `otherwise`)."""
        at = self._clock() + after
        if at - item.queued_at > self.chaos.max_event_age_seconds:
            self.report.add(otherwise)
            logger.warning("chaos: an event older than %.0f s is dropped (%s): %s", self.chaos.max_event_age_seconds,
                           otherwise, _runs(item.event))
            return
        self._queue.put(at, item)

    def _run(self, item: _Delivery) -> bool:
        """Run the executor handler on this environment's thread; False when the invocation was killed."""
        point = item.fate.kills[item.runs] if item.runs < len(item.fate.kills) else None
        kill = Kill(point) if point is not None else None
        self.report.add("runs")
        try:
            with planned(kill):
                self._executor.invoke(item.event)
            if kill is not None:
                kill.after_work()
            return True
        except Exception:  # a function error, which Lambda logs and retries; a kill is one too (a timeout)
            if kill is not None and kill.dead:
                self.report.died(kill, item.event)
                logger.warning("chaos: invocation killed (%s): %s", kill.point, _runs(item.event))
                self._retry(item)
                return False
            self.report.add("errors")
            logger.exception("executor invocation failed: %s", _runs(item.event))
            self._retry(item)
            return True

    def _retry(self, item: _Delivery) -> None:
        if item.runs >= self.chaos.retries:
            self.report.add("discarded")
            logger.warning("chaos: no retry left for %s", _runs(item.event))
            return
        self.report.add("retried")
        self._again(replace(item, runs=item.runs + 1), self.chaos.retry_delay_seconds * (item.runs + 1), "discarded")


def _runs(event: dict[str, Any]) -> str:
    return ", ".join(f"{d.get('execution_id')}#{d.get('attempt')}" for d in event.get("dispatches", []))
