"""The interfaces between Tickwork's core and the edges a runtime swaps, with their contracts.

An `Invoker` hands due runs to executors (the poller's edge); a `Sender` sends one invocation's group
of runs (the executor's edge), each an `Attempt` made ready by its kind of target (tickwork.targets.base).
The Lambda implementations are tickwork.dispatch.invoker.LambdaInvoker and tickwork.runs.sending.BoundedSender;
the local runtime's, for many invocations in one process, live in tickwork_local. The core takes them from
its Services and never asks which runtime it is in.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, Sequence

from tickwork.models import Dispatch, StartedExecution
from tickwork.outcome import Outcome


class Attempt(Protocol):
    """One attempt made ready by its kind of target (tickwork.targets.base.Target.prepare); each method but
    `complete` returns at once, and none raises."""

    def warm_lead(self) -> float | None:
        """How long before its instant `warm` is to be called: None when nothing is left to do ahead (what
        is left, if anything, is done by `fire`)."""
        ...

    def warm(self, within: float) -> None:
        """The last step ahead, for a call `within` seconds from now (HTTP: a connection to a target that
        closes those that wait)."""
        ...

    def fire(self) -> None:
        """Make the call now, as far as it goes without waiting for the target (an attempt that failed
        ahead does nothing). The rest, if any, is `finish_write`'s."""
        ...

    def finish_write(self) -> None:
        """Send what `fire` left, waiting for the target within the attempt's time; `complete` does it first."""
        ...

    def awaiting(self) -> tuple[Any | None, float]:
        """Once fired and sent whole: something a selector can watch for the answer (it has a fileno()), and
        the attempt's deadline (time.monotonic()), so a runtime may read many answers on one thread; None when
        there is nothing to watch (complete() waits by itself, or has nothing to wait for)."""
        ...

    def complete(self) -> Outcome:
        """Await the answer (within the attempt's time) and classify it; what failed ahead is reported here."""
        ...

    def abandon(self) -> None:
        """Never to be fired (its run was dropped at its instant): release what it holds."""
        ...


@dataclass(frozen=True)
class Result:
    """A run sent: the run, when it was sent (the attempt's start), and what happened."""

    run: StartedExecution
    sent_at: datetime
    outcome: Outcome


class Invoker(Protocol):
    """Hands dispatches to executors without waiting for them to run.

    Contract: when `invoke` returns, every dispatch has been accepted for at-least-once execution;
    when it raises, some may not have been, and the sweeper re-dispatches executions left `queued`.
    """

    def invoke(self, dispatches: Sequence[Dispatch]) -> None: ...


@dataclass(frozen=True)
class Group:
    """The runs of one invocation of several, each named once."""

    ahead: list[tuple[Dispatch, StartedExecution]]  # started before their instant, in instant order
    at_instant: list[Dispatch]  # of jobs that forbid overlap: judged at their instant, by `run_guarded`

    def __len__(self) -> int:
        return len(self.ahead) + len(self.at_instant)


class RunSteps(Protocol):
    """The executor's steps for one run, which a Sender calls from any of its threads."""

    def prepare(self, run: StartedExecution) -> Attempt:
        """Check the target and ready the call through its kind of target (tickwork.targets.base); a refused
        or unreachable target is an Attempt whose outcome is that failure, not an exception."""
        ...

    def connect(self, prepared: Attempt, fire_at_ms: int) -> None:
        """Take a ready attempt's last step ahead if it was left for later (`Attempt.warm`: an HTTP target that
        closes connections that wait): blocks until no earlier than its lead before the instant. Returns at once
        otherwise."""
        ...

    def wait_until(self, fire_at_ms: int) -> None:
        """Sleep until the instant, on the executor's clock; returns at once if it has passed."""
        ...

    def fire(self, prepared: Attempt) -> datetime:
        """Make the call now, as far as it goes without waiting for the target (the rest is sent by
        `Attempt.finish_write`, or `complete`); returns the moment it was sent (the attempt's start)."""
        ...

    def stopped_lately(self, runs: Sequence[StartedExecution]) -> set[str]:
        """Just before writing these runs, due now: the ids of those whose job was paused or deleted lately
        (one round trip for them all). None is written before `drop_stopped` has judged it."""
        ...

    def drop_stopped(self, runs: Sequence[StartedExecution]) -> set[str]:
        """Of the runs `stopped_lately` named, record skipped those their job no longer makes; returns their
        ids. The others are written at once."""
        ...

    def run_guarded(self, dispatch: Dispatch) -> Result | str:
        """At its instant, judge a run not started ahead; if it starts, ready it, send it and await
        its response. Returns its result, or why it did not start."""
        ...


class Results(Protocol):
    """Where a Sender hands over what each run came to; the executor records results as they arrive."""

    def put(self, result: Result) -> None: ...

    def not_started(self, dispatch: Dispatch, reason: str) -> None: ...


class Sender(Protocol):
    """Sends the runs of one invocation's group: readies them, sends each at its instant, awaits
    their responses. A group of one run never reaches a Sender: the executor runs it in its own thread.

    Contract: `send` returns once every run of `group` has been handed to `results`. Each run of
    `group.ahead` is readied with `steps.prepare` then `steps.connect`, sent with `steps.fire` no earlier than
    `steps.wait_until` its instant allows, and its response read (`Attempt.complete`) into
    `results.put`, unless `steps.stopped_lately` names it at its instant and `steps.drop_stopped` then drops
    it (it goes to `results.not_started` as 'skipped', unsent); each run of `group.at_instant` goes through
    `steps.run_guarded` into `results.put` or `results.not_started`. Results are handed over as they arrive,
    never held for the slowest, and
    runs due at one instant are written together, in an order that favours none of them, none waiting for
    another's response or target. If a step raises, `send` raises the first such error once the runs
    already under way are done.

    One Sender serves every invocation of its execution environment (several at once where the
    runtime runs them in one process), so it keeps nothing of a group once `send` returns.
    """

    def send(self, steps: RunSteps, group: Group, results: Results) -> None: ...

    def close(self) -> None:
        """Release what the Sender keeps between groups (threads a local one shares), if anything."""
        ...
