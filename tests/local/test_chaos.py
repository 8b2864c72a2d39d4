"""The chaotic invoker's own rules (tickwork_local.chaos, tickwork_local.kills), on a stand-in executor handler.

What it does to the real executor, end to end, is tests/faults/test_lambda_semantics.py's.
"""
from __future__ import annotations

import random
import threading
import time
from types import SimpleNamespace
from typing import Any, Callable

import pytest

import tickwork.runs.executor
from tickwork.errors import ConfigurationError
from tickwork.models import Dispatch
from tickwork_local.chaos import Chaos, ChaoticInvoker, draw_fate
from tickwork_local.config import LocalConfig
from tickwork_local.functions import LambdaFunction
from tickwork_local.kills import (
    AFTER_WORK,
    AFTER_WRITE,
    BEFORE_WRITE,
    InvocationKilled,
    Kill,
    MortalExecutor,
    mortal_executors,
)

QUIET = {"duplicate": 0.0, "delay": 0.0, "throttle": 0.0, "kill": 0.0}
FAST = {"max_delay_seconds": 0.02, "retry_delay_seconds": 0.01, "throttle_backoff_seconds": 0.01}
DISPATCHES = [Dispatch(f"run-{n}", 1, 0) for n in range(5)]


class Handler:
    """The executor function's stand-in: records which thread ran which event, and raises if told to."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[str, str]] = []  # (run id, thread name)
        self.fail = fail
        self._lock = threading.Lock()

    def __call__(self, event: dict[str, Any], _context: Any) -> Any:
        with self._lock:
            self.calls += [(d["execution_id"], threading.current_thread().name) for d in event["dispatches"]]
        if self.fail:
            raise RuntimeError("the function failed")
        return {"outcomes": ["succeeded"] * len(event["dispatches"])}


def run_all(chaos: Chaos, handler: Handler) -> ChaoticInvoker:
    """Hand DISPATCHES over (one event each) and wait until Lambda's queue has nothing left for them."""
    invoker = ChaoticInvoker(LambdaFunction("tickwork-executor", handler, 180), chaos, environments=4)
    try:
        invoker.invoke(DISPATCHES)
        assert _wait(lambda: invoker.pending() == 0), invoker.report.summary()
    finally:
        assert invoker.close(1.0)
    return invoker


def _wait(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def test_a_seed_replays_the_same_fates_whatever_they_come_to() -> None:
    chaos = Chaos(7, duplicate=0.5, delay=0.5, throttle=0.5, kill=0.5)
    first, again, other = random.Random(7), random.Random(7), random.Random(8)
    fates = [draw_fate(first, chaos) for _ in range(50)]
    assert fates == [draw_fate(again, chaos) for _ in range(50)]
    assert fates != [draw_fate(other, chaos) for _ in range(50)]
    # As many numbers are drawn for a quiet fate as for a busy one: the n-th event's fate depends on n alone.
    quiet, busy = random.Random(7), random.Random(7)
    for _ in range(50):
        draw_fate(quiet, Chaos(7, **QUIET))
        draw_fate(busy, Chaos(7, duplicate=1.0, delay=1.0, throttle=1.0, kill=1.0))
    assert quiet.getstate() == busy.getstate()


def test_the_environment_variable_gives_a_seed_and_knobs() -> None:
    assert LocalConfig.from_env({}).chaos is None
    assert LocalConfig.from_env({"TICKWORK_LOCAL_CHAOS": "7"}).chaos == Chaos(7)
    chaos = Chaos.parse("7, kill=0.2, kill_points=after_write/before_write, retries=1, max_event_age_seconds=60")
    assert chaos == Chaos(7, kill=0.2, kill_points=(AFTER_WRITE, BEFORE_WRITE), retries=1, max_event_age_seconds=60.0)
    for wrong in ("seven", "7,kill=much", "7,kills=0.1", "7,kill=1.5", "7,retries=3", "7,kill_points=never"):
        with pytest.raises(ConfigurationError):
            Chaos.parse(wrong)


def test_quiet_chaos_runs_every_event_once() -> None:
    handler = Handler()
    invoker = run_all(Chaos(1, **QUIET, **FAST), handler)
    assert sorted(run for run, _ in handler.calls) == [d.execution_id for d in DISPATCHES]
    assert (invoker.report.events, invoker.report.runs) == (5, 5)


def test_a_duplicated_event_runs_twice() -> None:
    handler = Handler()
    invoker = run_all(Chaos(1, **{**QUIET, "duplicate": 1.0}, **FAST), handler)
    assert sorted(run for run, _ in handler.calls) == sorted(d.execution_id for d in DISPATCHES * 2)
    assert invoker.report.duplicated == 5


def test_a_throttled_event_runs_after_its_backoff_unless_it_grew_too_old() -> None:
    handler = Handler()
    invoker = run_all(Chaos(1, **{**QUIET, "throttle": 1.0}, **FAST), handler)
    assert len(handler.calls) == 5 and invoker.report.throttled == 5

    handler = Handler()
    invoker = run_all(Chaos(1, **{**QUIET, "throttle": 1.0}, **{**FAST, "max_event_age_seconds": 0.001}), handler)
    assert handler.calls == [] and invoker.report.expired == 5


def test_a_failed_invocation_is_retried_as_often_as_lambda_would_then_discarded() -> None:
    handler = Handler(fail=True)
    invoker = run_all(Chaos(1, **QUIET, **FAST), handler)
    assert len(handler.calls) == 5 * 3  # the first run and MaximumRetryAttempts (2) retries
    report = invoker.report
    assert (report.errors, report.retried, report.discarded) == (15, 10, 5)


def test_an_invocation_killed_after_its_work_runs_again_in_a_new_environment() -> None:
    handler = Handler()
    invoker = run_all(Chaos(1, **{**QUIET, "kill": 1.0}, kill_points=(AFTER_WORK,), retries=1, **FAST), handler)
    assert len(handler.calls) == 10 and invoker.report.killed[AFTER_WORK] == 10
    threads = [thread for _, thread in handler.calls]
    assert len(set(threads)) == len(threads)  # each environment ended with its killed invocation
    assert invoker.report.discarded == 5


def _prepared(run_id: str, attempt: int) -> Any:
    return SimpleNamespace(headers={"Tickwork-Run-Id": run_id, "Tickwork-Attempt": str(attempt)})


def _result(run_id: str, attempt: int) -> Any:
    return SimpleNamespace(run=SimpleNamespace(id=run_id, attempt=attempt), sent_at=None, outcome=None)


def test_killed_after_its_write_an_invocation_records_nothing_and_writes_nothing_more() -> None:
    kill = Kill(AFTER_WRITE)
    kill.before_write(_prepared("a", 1))
    kill.before_write(_prepared("b", 2))
    with pytest.raises(InvocationKilled):
        kill.before_record([_result("a", 1)])
    with pytest.raises(InvocationKilled):
        kill.before_write(_prepared("c", 1))
    with pytest.raises(InvocationKilled):
        kill.before_record([_result("b", 2)])
    assert kill.left() == ({("c", 1)}, {("a", 1), ("b", 2)})


def test_killed_before_its_write_an_invocation_sends_nothing() -> None:
    kill = Kill(BEFORE_WRITE)
    with pytest.raises(InvocationKilled):
        kill.before_write(_prepared("a", 1))
    assert kill.left() == ({("a", 1)}, set())


def test_killed_after_its_work_an_invocation_did_all_of_it() -> None:
    kill = Kill(AFTER_WORK)
    kill.before_write(_prepared("a", 1))
    kill.before_record([_result("a", 1)])
    with pytest.raises(InvocationKilled):
        kill.after_work()
    assert kill.left() == (set(), set())


def test_executors_are_mortal_only_while_a_chaotic_invoker_is_open() -> None:
    original = tickwork.runs.executor.Executor
    with mortal_executors():
        with mortal_executors():
            assert tickwork.runs.executor.Executor is MortalExecutor
        assert tickwork.runs.executor.Executor is MortalExecutor
    assert tickwork.runs.executor.Executor is original
