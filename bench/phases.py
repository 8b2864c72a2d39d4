"""Each benchmark of `python -m bench` runs as a phase inside a guard: a phase that cannot run (a tool or
interpreter missing, an exception) is reported as skipped with its reason, in the table and in --json,
and every other phase still runs and keeps its results. A run of many minutes never ends empty-handed
because one step near its end could not start.
"""
from __future__ import annotations

import math
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, TextIO

Rows = list[tuple[str, ...]]
# A reason longer than this is cut in the table (the whole of it is in --json).
REASON_CHARS = 240


class Unavailable(RuntimeError):
    """What a phase needs is not on this machine (a tool, an interpreter): skipped, not failed."""


class OverBudget(RuntimeError):
    """A phase ran past its time budget before it had anything to report."""


@dataclass
class Deadline:
    """A phase's time budget (`make bench` must end in minutes, whatever the machine): it stops waiting once
    over it and reports what it has, or raises OverBudget where it has nothing yet."""

    seconds: float | None  # None: no budget
    clock: Callable[[], float] = time.monotonic
    started: float = field(init=False)

    def __post_init__(self) -> None:
        self.started = self.clock()

    def left(self) -> float:
        return math.inf if self.seconds is None else self.started + self.seconds - self.clock()

    def over(self) -> bool:
        return self.left() <= 0

    def bounded(self, seconds: float) -> float:
        """`seconds`, or what is left of the budget if less (never below 0)."""
        return max(0.0, min(seconds, self.left()))

    def check(self, step: str) -> None:
        if self.over():
            raise OverBudget(f"over its time budget of {self.seconds:g} s before {step}")


@dataclass(frozen=True)
class Phase:
    name: str
    title: str  # what the phase measures, for its row when it is skipped
    progress: str  # printed as it starts
    run: Callable[[], Any]
    rows: Callable[[Any], Rows] = lambda _result: []


@dataclass
class Outcome:
    results: dict[str, Any] = field(default_factory=dict)
    rows: Rows = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # phase name -> reason
    failed: list[str] = field(default_factory=list)  # the skipped phases that raised, not merely Unavailable


def run_phases(phases: Sequence[Phase], out: TextIO, errors: TextIO) -> Outcome:
    """Run every phase in order; one that raises is recorded as skipped and the next one runs."""
    outcome = Outcome()
    for phase in phases:
        print(f"{phase.progress} ...", flush=True, file=out)
        try:
            result = phase.run()
            outcome.results[phase.name] = result
            outcome.rows += phase.rows(result)
        except (Exception, SystemExit) as exc:  # SystemExit too: a phase calling sys.exit ends only itself
            _skip(outcome, phase, exc, out, errors)
    return outcome


def _skip(outcome: Outcome, phase: Phase, exc: BaseException, out: TextIO, errors: TextIO) -> None:
    reason = reason_of(exc)
    outcome.skipped[phase.name] = reason
    outcome.rows.append((skipped_row(phase.title, reason),))
    print(f"  skipped: {reason}", flush=True, file=out)
    if not isinstance(exc, Unavailable):
        outcome.failed.append(phase.name)
        traceback.print_exception(exc, file=errors)


def reason_of(exc: BaseException) -> str:
    if isinstance(exc, Unavailable):
        return str(exc)
    if isinstance(exc, SystemExit):
        return f"exited: {exc.code}"
    return f"{type(exc).__name__}: {exc}"


def skipped_row(title: str, reason: str) -> str:
    """One line that neither breaks the Markdown table nor widens the terminal's columns."""
    line = " ".join(reason.split()).replace("|", "/")
    if len(line) > REASON_CHARS:
        line = line[:REASON_CHARS - 1] + "…"
    return f"{title}: skipped: {line}"
