"""The Sender contract (tickwork.interfaces.Sender), run against every Sender on fake run steps.

The steps keep a clock of their own that `wait_until` moves forward, so no test waits for real time;
threads meet on events with generous timeouts only.
"""
from __future__ import annotations

import threading
from datetime import datetime, timezone
from typing import Callable, Iterator

import pytest

from tickwork.interfaces import Group, Result, Sender
from tickwork.models import Dispatch, StartedExecution
from tickwork.outcome import Outcome
from tickwork.runs.sending import MAX_PARALLEL_SENDS, BoundedSender
from tickwork_local.sending import SHARED_THREADS, GatedSender, SharedSender

T0_MS = 1_800_000_000_000
WAIT_SECONDS = 10.0
SENDERS: list[Callable[[], Sender]] = [BoundedSender, GatedSender, SharedSender]
OK = Outcome(200, "ok", None, 1, failure=None)


class FakePrepared:
    def __init__(self, run: StartedExecution, complete_hook: Callable[[StartedExecution], None] = lambda run: None,
                 answer_on: object = None) -> None:
        self.run = run
        self.complete_hook = complete_hook
        self.answer_on = answer_on  # what awaiting() names as the socket its answer arrives on
        self.abandoned = False

    def abandon(self) -> None:
        self.abandoned = True

    def finish_write(self) -> None:
        pass  # every fake request leaves whole when fired

    def complete(self) -> Outcome:
        self.complete_hook(self.run)
        return OK

    def awaiting(self) -> tuple[object, float]:
        # None: nothing to wait on before complete() (some of the request left to write, or a failed write).
        return self.answer_on, 0.0


class FakeSteps:
    """RunSteps on a fake clock, noting every request sent as (run id, clock reading).

    With `ready_first`, waiting for an instant first waits for that many runs to be ready, as a real
    wait of a second or so would: their sending then does not depend on how threads are scheduled."""

    def __init__(self, ready_first: int = 0) -> None:
        self.now_ms = T0_MS
        self.sent: list[tuple[str, int]] = []
        self.lock = threading.Lock()
        self.prepare_hook: Callable[[StartedExecution], None] = lambda run: None
        self.complete_hook: Callable[[StartedExecution], None] = lambda run: None  # reading the response
        self.guarded: dict[str, str] = {}  # execution id -> why it does not start
        self.awaiting_answer: set[str] = set()  # runs written whole when fired: their answer is all that is left
        self.marked: set[str] = set()  # runs whose job a pause marked: held back at their instant...
        self.stopped: set[str] = set()  # ...and of those, the ones Postgres then drops
        self.checks: list[tuple[int, list[str]]] = []  # each check at an instant: (clock, runs asked about)
        self.prepared: dict[str, FakePrepared] = {}
        self._ready = threading.Semaphore(0)
        self._ready_first = ready_first

    def prepare(self, run: StartedExecution) -> FakePrepared:
        self.prepare_hook(run)
        self._ready.release()
        prepared = FakePrepared(run, self.complete_hook, object() if run.id in self.awaiting_answer else None)
        self.prepared[run.id] = prepared
        return prepared

    def connect(self, prepared: FakePrepared, fire_at_ms: int) -> None:
        pass  # every fake run is connected when made ready

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

    def stopped_lately(self, runs: list[StartedExecution]) -> set[str]:
        with self.lock:
            self.checks.append((self.now_ms, sorted(run.id for run in runs)))
        return {run.id for run in runs} & self.marked

    def drop_stopped(self, runs: list[StartedExecution]) -> set[str]:
        assert {run.id for run in runs} <= self.marked
        return {run.id for run in runs} & self.stopped

    def run_guarded(self, dispatch: Dispatch) -> Result | str:
        if dispatch.execution_id in self.guarded:
            return self.guarded[dispatch.execution_id]
        run = _run(dispatch.execution_id)
        return Result(run, self.fire(FakePrepared(run)), OK)


class Collected:
    def __init__(self) -> None:
        self.results: list[Result] = []
        self.not_started_: dict[str, str] = {}
        self.handed = threading.Condition()

    def put(self, result: Result) -> None:
        with self.handed:
            self.results.append(result)
            self.handed.notify_all()

    def wait_for(self, run_id: str) -> Result | None:
        with self.handed:
            self.handed.wait_for(lambda: any(r.run.id == run_id for r in self.results), WAIT_SECONDS)
            return next((r for r in self.results if r.run.id == run_id), None)

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
    assert sorted(steps.sent[:2]) == [("a", T0_MS), ("b", T0_MS)]  # one instant's, in either order
    assert steps.sent[2:] == [("c", T0_MS + 250), ("d", T0_MS + 900)]
    assert sorted((r.run.id, r.outcome) for r in results.results) == [(r, OK) for r in "abcd"]


def test_the_runs_of_one_instant_are_written_in_random_order_not_in_the_groups(sender: Sender) -> None:
    """The poller hands an instant's runs over by job id: in that order, a tenant keeping low ids would
    always be written first, and the others after it."""
    ids = [f"run-{i:02}" for i in range(30)]
    steps, results = FakeSteps(ready_first=31), Collected()
    sender.send(steps, Group(_ahead(*[(run_id, 0) for run_id in ids], ("later", 100)), []), results)
    written = [run_id for run_id, _ in steps.sent]
    assert sorted(written[:30]) == ids and written[30:] == ["later"]
    assert written[:30] != ids  # the group's order comes out again once in 30! (about 4e32) sends


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
    assert sorted(r.run.id for r in results.results) == ["later", "slow"]


def test_runs_with_some_of_their_request_left_to_write_get_the_groups_threads_before_runs_awaiting_answers() -> None:
    """fire() leaves what a target did not take at once (or a connection to open) to the thread that then
    reads the answer: behind answers, which may take their whole timeout, it would go out late. One thread
    here, reading in the order it is handed the runs (the answers' sockets are only named: BoundedSender
    reads on its threads without watching them)."""
    steps, results = FakeSteps(ready_first=30), Collected()
    steps.awaiting_answer = {f"answer-{i:02}" for i in range(15)}
    completed: list[str] = []
    steps.complete_hook = lambda run: completed.append(run.id)
    runs = [(run_id, 0) for run_id in sorted(steps.awaiting_answer)] + [(f"writing-{i:02}", 0) for i in range(15)]
    BoundedSender(width=1).send(steps, Group(_ahead(*runs), []), results)
    assert sorted(completed[:15]) == [f"writing-{i:02}" for i in range(15)]
    assert sorted(completed[15:]) == sorted(steps.awaiting_answer)


def test_runs_judged_at_their_instant_are_handed_over_with_why_they_did_not_start(
    sender: Sender,
) -> None:
    steps, results = FakeSteps(), Collected()
    steps.guarded = {"skipped-one": "skipped"}
    guarded = [Dispatch("skipped-one", 1, T0_MS), Dispatch("started-one", 1, T0_MS)]
    sender.send(steps, Group(_ahead(("ahead", 0)), guarded), results)
    assert results.not_started_ == {"skipped-one": "skipped"}
    assert sorted(r.run.id for r in results.results) == ["ahead", "started-one"]


def test_runs_of_jobs_stopped_since_they_started_are_checked_once_per_instant_and_dropped_unsent(
    sender: Sender,
) -> None:
    """At each instant the steps are asked once, about that instant's runs, just before the writes; a run
    held back and dropped is handed over not started ('skipped'), its connection abandoned, never written; one
    held back but not dropped (a manual run of a paused job) is written at the same instant."""
    steps, results = FakeSteps(ready_first=4), Collected()
    steps.marked, steps.stopped = {"paused", "manual"}, {"paused"}
    sender.send(steps, Group(_ahead(("paused", 0), ("manual", 0), ("other", 0), ("later", 300)), []), results)
    assert steps.checks == [(T0_MS, ["manual", "other", "paused"]), (T0_MS + 300, ["later"])]
    assert sorted(steps.sent) == [("later", T0_MS + 300), ("manual", T0_MS), ("other", T0_MS)]
    assert results.not_started_ == {"paused": "skipped"}
    assert sorted(r.run.id for r in results.results) == ["later", "manual", "other"]
    assert steps.prepared["paused"].abandoned and not steps.prepared["manual"].abandoned


def test_a_dropped_run_still_getting_ready_at_its_instant_is_never_sent_by_its_preparation(sender: Sender) -> None:
    steps, results = FakeSteps(), Collected()
    steps.marked = steps.stopped = {"slow"}
    dropped = threading.Event()
    steps.prepare_hook = lambda run: assert_set(dropped) if run.id == "slow" else None
    original_drop = steps.drop_stopped

    def drop(runs: list[StartedExecution]) -> set[str]:
        found = original_drop(runs)
        dropped.set()
        return found

    steps.drop_stopped = drop  # type: ignore[method-assign]
    sender.send(steps, Group(_ahead(("slow", 0), ("later", 500)), []), results)
    assert steps.sent == [("later", T0_MS + 500)]
    assert results.not_started_ == {"slow": "skipped"} and steps.prepared["slow"].abandoned


def assert_set(event: threading.Event) -> None:
    assert event.wait(WAIT_SECONDS)


def test_a_failing_step_is_raised_once_the_other_runs_are_handed_over(sender: Sender) -> None:
    steps, results = FakeSteps(), Collected()

    def broken(run: StartedExecution) -> None:
        if run.id == "broken":
            raise RuntimeError("prepare failed")

    steps.prepare_hook = broken
    with pytest.raises(RuntimeError, match="prepare failed"):
        sender.send(steps, Group(_ahead(("broken", 0), ("fine", 0), ("later", 100)), []), results)
    assert sorted(r.run.id for r in results.results) == ["fine", "later"]


def _blocking(runs: int, stage: str, release: threading.Event) -> tuple[FakeSteps, threading.Semaphore]:
    """Steps on which runs named stuck-* block getting ready or reading (`stage`) until `release`, and a
    semaphore counting those that have begun to. To block reading, all `runs` are ready before their
    instant: every response is then read after the instant's writes, in instant order."""
    steps, entered = FakeSteps(ready_first=runs if stage == "complete" else 0), threading.Semaphore(0)

    def block(run: StartedExecution) -> None:
        if run.id.startswith("stuck-"):
            entered.release()
            release.wait(3 * WAIT_SECONDS)  # outlasts every wait of the test: a run held back shows

    setattr(steps, f"{stage}_hook", block)
    return steps, entered


@pytest.mark.parametrize("stage", ["prepare", "complete"])
def test_a_run_behind_more_runs_blocked_on_their_target_than_the_group_has_threads_still_goes(
    sender: Sender, stage: str,
) -> None:
    """Targets that never open a connection (getting ready) or answer a byte at a time (reading) hold
    back their own runs only, however many of them share a group with another tenant's run."""
    results, release = Collected(), threading.Event()
    steps, _ = _blocking(2 * MAX_PARALLEL_SENDS + 1, stage, release)
    group = Group(_ahead(*[(f"stuck-{i}", 0) for i in range(2 * MAX_PARALLEL_SENDS)], ("other", 0)), [])
    sending = threading.Thread(target=sender.send, args=(steps, group, results))
    sending.start()
    try:
        assert results.wait_for("other") is not None  # before any stuck one is released
    finally:
        release.set()
        sending.join(WAIT_SECONDS)
    assert len(results.results) == 2 * MAX_PARALLEL_SENDS + 1


@pytest.mark.parametrize("stage", ["prepare", "complete"])
def test_a_group_whose_runs_block_on_their_target_holds_back_no_other_groups_runs(sender: Sender, stage: str) -> None:
    """Targets that never open a connection (getting ready) or answer a byte at a time (reading), more of
    them at once than a process shares threads, hold back their own runs only."""
    release = threading.Event()
    blocked_steps, entered = _blocking(2 * SHARED_THREADS, stage, release)
    stuck = Group(_ahead(*[(f"stuck-{i}", 0) for i in range(2 * SHARED_THREADS)]), [])
    blocking = threading.Thread(target=sender.send, args=(blocked_steps, stuck, Collected()))
    other_steps, other_results, other_done = FakeSteps(), Collected(), threading.Event()
    other = threading.Thread(target=lambda: (sender.send(other_steps, Group(_ahead(("other", 0)), []), other_results),
                                             other_done.set()))
    blocking.start()
    try:
        for _ in range(SHARED_THREADS):  # every thread a process shares is now held
            assert entered.acquire(timeout=WAIT_SECONDS)
        other.start()
        assert other_done.wait(WAIT_SECONDS)  # with no thread added for it: only once the others are released
        assert [(r.run.id, r.outcome) for r in other_results.results] == [("other", OK)]
    finally:
        release.set()
        blocking.join(WAIT_SECONDS)
        other.join(WAIT_SECONDS)
    assert len(blocked_steps.sent) == 2 * SHARED_THREADS


def test_a_tenants_runs_blocked_on_their_target_past_the_pools_default_cap_hold_back_no_other_groups_run() -> None:
    """In the local runtime's process (SharedSender) one tenant's runs on a target that never completes a
    connection may number its max_runs_in_flight (500 by default), more than an ElasticPool's default cap of
    threads (256): another group's run still goes while every one of them is blocked."""
    from tickwork.runs.pool import MOST_THREADS
    from tickwork.settings import DEFAULT_MAX_RUNS_IN_FLIGHT

    blocked = DEFAULT_MAX_RUNS_IN_FLIGHT
    assert blocked > MOST_THREADS  # else this would show nothing the test above does not
    sender, release = SharedSender(), threading.Event()
    blocked_steps, entered = _blocking(blocked, "prepare", release)
    groups = [Group(_ahead(*[(f"stuck-{g}-{i}", 0) for i in range(50)]), []) for g in range(blocked // 50)]
    blocking = [threading.Thread(target=sender.send, args=(blocked_steps, group, Collected())) for group in groups]
    other_steps, other_results, other_done = FakeSteps(), Collected(), threading.Event()
    other = threading.Thread(target=lambda: (sender.send(other_steps, Group(_ahead(("other", 0)), []), other_results),
                                             other_done.set()))
    for thread in blocking:
        thread.start()
    try:
        for _ in range(blocked):  # every one of them is blocked on its target, each on a thread of its own
            assert entered.acquire(timeout=WAIT_SECONDS)
        other.start()
        assert other_done.wait(WAIT_SECONDS)
        assert [(r.run.id, r.outcome) for r in other_results.results] == [("other", OK)]
    finally:
        release.set()
        for thread in [*blocking, other]:
            thread.join(WAIT_SECONDS)
        sender.close()
    assert len(blocked_steps.sent) == blocked
