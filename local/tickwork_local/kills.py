"""An executor invocation killed mid-run, as Lambda kills one at its timeout, inside this process.

The executor shares the local runtime's process with the poller and the API, so it cannot be killed as a
process. A process per invocation, SIGKILLed, would add a cold start (imports, a Postgres pool: about a second
here) to each event it runs, and a kill at a random moment mostly lands while the executor waits for its
instant, missing the few milliseconds between a write and its record, which are what matter. So a killed
invocation dies at a point of its own, chosen (and replayed) by the chaotic invoker:

- `before_write`: just before it writes a request. The run was started (`running` in Postgres), nothing sent.
- `after_write`: once a request was answered, before its result is recorded. The target may have acted on
  it; Postgres still says `running`: the crash window, where the sweeper ends the attempt lost and a retry
  may send the run again (docs/operations.md).
- `after_work`: once its work is done. Lambda still sees a timeout, a function error, and retries the event.

From its point on, every write and every record of that invocation raises InvocationKilled, on whichever
thread it runs (the Sender's, the recorder's), so nothing it had under way is sent or recorded afterwards.
The executor core is not changed for this: while `mortal_executors` holds, tickwork.runs.executor.handle_event
builds a MortalExecutor, whose write and record ask the invocation's Kill first.
"""
from __future__ import annotations

import contextlib
import contextvars
import threading
from typing import Any, Iterator, Sequence

import tickwork.runs.executor
from tickwork import interfaces
from tickwork.interfaces import Result

BEFORE_WRITE, AFTER_WRITE, AFTER_WORK = "before_write", "after_write", "after_work"
KILL_POINTS = (BEFORE_WRITE, AFTER_WRITE, AFTER_WORK)

Attempt = tuple[str, int]  # (run id, attempt number)


class InvocationKilled(Exception):
    """The invocation was killed, as Lambda kills one at its timeout."""


class Kill:
    """Where one invocation dies, and what it leaves behind: once dead, every write and record of it raises."""

    def __init__(self, point: str) -> None:
        self.point = point
        self.dead = False
        self._written: set[Attempt] = set()
        self._recorded: set[Attempt] = set()
        self._unsent: set[Attempt] = set()  # started, and stopped at the write
        self._lock = threading.Lock()

    def left(self) -> tuple[set[Attempt], set[Attempt]]:
        """The attempts it stopped at their write, and those it wrote and never recorded."""
        with self._lock:
            return set(self._unsent), self._written - self._recorded

    def before_write(self, prepared: interfaces.Attempt) -> None:
        attempt = _attempt_of(prepared)
        with self._lock:
            self.dead = self.dead or self.point == BEFORE_WRITE
            (self._unsent if self.dead else self._written).update(attempt)
            if not self.dead:
                return
        raise InvocationKilled(self.point)

    def before_record(self, results: Sequence[Result]) -> None:
        with self._lock:
            self.dead = self.dead or self.point == AFTER_WRITE
            if not self.dead:
                self._recorded.update((r.run.id, r.run.attempt) for r in results)
                return
        raise InvocationKilled(self.point)

    def after_work(self) -> None:
        """The invocation returned: killed now if this is its point (or if it died and the error was lost)."""
        with self._lock:
            self.dead = self.dead or self.point == AFTER_WORK
            if not self.dead:
                return
        raise InvocationKilled(self.point)


def _attempt_of(prepared: interfaces.Attempt) -> set[Attempt]:
    """The run and attempt an HTTP request is of, from the headers that name them (none for one that failed
    before it was built)."""
    headers = getattr(prepared, "headers", None) or {}
    run_id, attempt = headers.get("Tickwork-Run-Id"), headers.get("Tickwork-Attempt")
    return {(run_id, int(attempt))} if run_id and attempt else set()


# The Kill of the invocation running in this context, read once by the executor the handler builds; the
# Sender's and the recorder's threads reach it through that executor.
_planned: contextvars.ContextVar[Kill | None] = contextvars.ContextVar("tickwork_local_kill", default=None)


@contextlib.contextmanager
def planned(kill: Kill | None) -> Iterator[None]:
    """Run an invocation (on this thread) that dies as `kill` says; None: one that is not killed."""
    token = _planned.set(kill)
    try:
        yield
    finally:
        _planned.reset(token)


class MortalExecutor(tickwork.runs.executor.Executor):
    """The executor of an invocation that may be killed: its write and its record ask the Kill first."""

    kill: Kill | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        self.kill = _planned.get()

    def fire(self, prepared: interfaces.Attempt) -> Any:
        if self.kill is not None:
            self.kill.before_write(prepared)
        return super().fire(prepared)

    def record(self, results: Sequence[Result]) -> dict[str, str]:
        if self.kill is not None:
            self.kill.before_record(results)
        return super().record(results)


_lock = threading.Lock()
_holders = 0
_ORIGINAL = tickwork.runs.executor.Executor


@contextlib.contextmanager
def mortal_executors() -> Iterator[None]:
    """While held (by any number of chaotic invokers at once), the executor handler builds MortalExecutors."""
    global _holders
    with _lock:
        _holders += 1
        tickwork.runs.executor.Executor = MortalExecutor  # type: ignore[misc]
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if not _holders:
                tickwork.runs.executor.Executor = _ORIGINAL  # type: ignore[misc]
