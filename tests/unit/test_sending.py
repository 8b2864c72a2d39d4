"""The Sender contract (tickwork.interfaces.Sender), run against every Sender on fake run steps.

The steps keep a clock of their own that `wait_until` moves forward, so no test waits for real time;
threads meet on events with generous timeouts only.
"""
from __future__ import annotations

import threading
from datetime import datetime, timezone
from typing import Callable, Iterator

import pytest

from tickwork import delivery
from tickwork.interfaces import Group, Result, Sender
from tickwork.models import Dispatch, StartedExecution
from tickwork.sending import BoundedSender
from tickwork_local.sending import GatedSender, SharedSender

T0_MS = 1_800_000_000_000
WAIT_SECONDS = 10.0
SENDERS: list[Callable[[], Sender]] = [BoundedSender, GatedSender, SharedSender]
OK = delivery.Outcome(200, "ok", None, 1)


class FakePrepared:
    def __init__(self, run: StartedExecution) -> None:
        self.run = run

    def complete(self) -> delivery.Outcome:
        return OK

    def awaiting(self) -> tuple[None, float]:
        return None, 0.0


class FakeSteps:
    """RunSteps on a fake clock, noting every request sent as (run id, clock reading).

    With `ready_first`, waiting for an instant first waits for that many runs to be ready, as a real
    wait of a second or so would: their sending then does not depend on how threads are scheduled."""

    def __init__(self, ready_first: int = 0) -> None:
        self.now_ms = T0_MS
        self.sent: list[tuple[str, int]] = []
        self.lock = threading.Lock()
        self.prepare_hook: Callable[[StartedExecution], None] = lambda run: None
        self.guarded: dict[str, str] = {}  # execution id -> why it does not start
        self._ready = threading.Semaphore(0)
        self._ready_first = ready_first

    def prepare(self, run: StartedExecution) -> FakePrepared:
        self.prepare_hook(run)
        self._ready.release()
        return FakePrepared(run)

    def wait_until(self, fire_at_ms: int) -> None:
        for _ in range(self._ready_first):
            assert self._ready.acquire(timeout=WAIT_SECONDS)
        self._ready_first = 0
        with self.lock:
            self.now_ms = max(self.now_ms, fire_at_ms)

    def fire(self, prepared: FakePrepared) -> datetime:
        with self.lock:
            self.sent.append((prepared.run.id, self.now_ms))
            return datetime.fromtimestamp(self.now_ms / 1000, tz=timezone.utc)

    def run_guarded(self, dispatch: Dispatch) -> Result | str:
        if dispatch.execution_id in self.guarded:
            return self.guarded[dispatch.execution_id]
        run = _run(dispatch.execution_id)
        return run, self.fire(FakePrepared(run)), OK


class Collected:
    def __init__(self) -> None:
        self.results: list[Result] = []
        self.not_started_: dict[str, str] = {}

    def put(self, result: Result) -> None:
        self.results.append(result)

    def not_started(self, dispatch: Dispatch, reason: str) -> None:
        self.not_started_[dispatch.execution_id] = reason


@pytest.fixture(params=SENDERS, ids=lambda make: make.__name__)
def sender(request: pytest.FixtureRequest) -> Iterator[Sender]:
    made = request.param()
    yield made
    made.close()


def _run(run_id: str) -> StartedExecution:
    return StartedExecution(run_id, "job", "tenant", datetime(2027, 1, 15, 8, tzinfo=timezone.utc), 1, {}, {})


def _ahead(*runs: tuple[str, int]) -> list[tuple[Dispatch, StartedExecution]]:
    """(run id, milliseconds after T0) of runs started ahead, in instant order."""
    return [(Dispatch(run_id, 1, T0_MS + offset), _run(run_id)) for run_id, offset in runs]


def test_every_run_is_sent_once_at_its_instant_in_instant_order(sender: Sender) -> None:
    steps, results = FakeSteps(ready_first=4), Collected()
    sender.send(steps, Group(_ahead(("a", 0), ("b", 0), ("c", 250), ("d", 900)), []), results)
    assert steps.sent == [("a", T0_MS), ("b", T0_MS), ("c", T0_MS + 250), ("d", T0_MS + 900)]
    assert sorted((run.id, outcome) for run, _, outcome in results.results) == [(r, OK) for r in "abcd"]


def test_a_run_still_getting_ready_at_its_instant_is_sent_by_its_preparation(sender: Sender) -> None:
    steps, results = FakeSteps(), Collected()
    later_sent = threading.Event()

    def slow_first(run: StartedExecution) -> None:
        if run.id == "slow":
            assert later_sent.wait(WAIT_SECONDS)  # ready only once the sender moved on to a later instant

    steps.prepare_hook = slow_first
    original_fire = steps.fire

    def fire(prepared: FakePrepared) -> datetime:
        sent_at = original_fire(prepared)
        if prepared.run.id == "later":
            later_sent.set()
        return sent_at

    steps.fire = fire  # type: ignore[method-assign]
    sender.send(steps, Group(_ahead(("slow", 0), ("later", 500)), []), results)
    assert steps.sent == [("later", T0_MS + 500), ("slow", T0_MS + 500)]
    assert sorted(run.id for run, _, _ in results.results) == ["later", "slow"]


def test_runs_judged_at_their_instant_are_handed_over_with_why_they_did_not_start(
    sender: Sender,
) -> None:
    steps, results = FakeSteps(), Collected()
    steps.guarded = {"skipped-one": "skipped"}
    guarded = [Dispatch("skipped-one", 1, T0_MS), Dispatch("started-one", 1, T0_MS)]
    sender.send(steps, Group(_ahead(("ahead", 0)), guarded), results)
    assert results.not_started_ == {"skipped-one": "skipped"}
    assert sorted(run.id for run, _, _ in results.results) == ["ahead", "started-one"]


def test_a_failing_step_is_raised_once_the_other_runs_are_handed_over(sender: Sender) -> None:
    steps, results = FakeSteps(), Collected()

    def broken(run: StartedExecution) -> None:
        if run.id == "broken":
            raise RuntimeError("prepare failed")

    steps.prepare_hook = broken
    with pytest.raises(RuntimeError, match="prepare failed"):
        sender.send(steps, Group(_ahead(("broken", 0), ("fine", 0), ("later", 100)), []), results)
    assert sorted(run.id for run, _, _ in results.results) == ["fine", "later"]
