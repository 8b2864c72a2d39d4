"""The States Language interpreter the tick-loop test runs the template's definition with (tests/statemachine.py):
each documented rule it follows, on small definitions, and the template's own loop with the poller's timing
functions, where the milliseconds a Wait drops decide how often it ticks."""
from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any, Callable

import pytest

from tests.statemachine import LAMBDA_INVOKE, StateMachine, StatesError, VirtualClock, deployed_definition, iso
from tests.unit.test_template_operations import transformed
from tickwork.dispatch.poller import TICK_OFFSET_MS, next_tick_at, tick_point
from tickwork.timeutil import rfc3339

T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc).timestamp()
FN = "arn:aws:lambda:us-east-1:123456789012:function:f"


def _machine(states: dict[str, Any], clock: VirtualClock, fn: Callable[[Any], Any]) -> StateMachine:
    return StateMachine({"QueryLanguage": "JSONata", "StartAt": "Call", "States": states}, clock, {FN: fn})


def _task(**fields: Any) -> dict[str, Any]:
    return {"Type": "Task", "Resource": LAMBDA_INVOKE, "Output": "{% $states.result.Payload %}",
            "Arguments": {"FunctionName": FN, "Payload": {"n": "{% $states.input.n %}"}}, **fields}


def test_processes_take_turns_in_simulated_time_order() -> None:
    clock, seen = VirtualClock(T0), []

    def process(name: str, pause: float) -> Callable[[], None]:
        def run() -> None:
            for _ in range(3):
                clock.sleep(pause)
                seen.append((name, round(clock.time() - T0, 3)))
        return run

    clock.spawn(process("a", 1.0))
    clock.spawn(process("b", 0.75), at=T0 + 0.1)
    clock.run(until=T0 + 10)
    assert seen == [("b", 0.85), ("a", 1.0), ("b", 1.6), ("a", 2.0), ("b", 2.35), ("a", 3.0)]


def test_a_wait_honours_its_timestamp_to_the_second() -> None:
    clock, calls = VirtualClock(T0), []
    machine = _machine({"Call": _task(Next="Wait"),
                        "Wait": {"Type": "Wait", "Timestamp": "{% $states.input.at %}", "Next": "Done"},
                        "Done": {"Type": "Succeed"}}, clock,
                       lambda payload: calls.append(clock.time()) or {"at": rfc3339(_utc(T0 + 3.75))})
    machine.start("e1", {"n": 0})
    clock.run(until=T0 + 60)
    (execution,) = machine.executions
    ended = [t for t, state, what in execution.history if state == "Done"]
    assert ended == [T0 + 3]  # not 3.75: the milliseconds are dropped
    assert execution.status == "SUCCEEDED" and calls == [T0]


def test_a_timestamp_already_past_continues_at_once() -> None:
    clock = VirtualClock(T0)
    machine = _machine({"Call": _task(Next="Wait"),
                        "Wait": {"Type": "Wait", "Timestamp": "{% $states.input.at %}", "Next": "Done"},
                        "Done": {"Type": "Succeed"}}, clock, lambda p: {"at": "2026-11-30T11:59:59.900Z"})
    machine.start("e1", {"n": 0})
    clock.run(until=T0 + 5)
    assert machine.executions[0].history[-1] == (T0, "", "SUCCEEDED")


def test_retry_takes_only_its_errors_then_catch_takes_the_rest() -> None:
    clock, failures = VirtualClock(T0), ["Lambda.ServiceException", "Lambda.ServiceException", "ValueError"]

    def flaky(payload: Any) -> Any:
        if failures:
            error = failures.pop(0)
            if error == "ValueError":
                raise ValueError("a function error")
            raise StatesError(error, "the service")
        return {"n": 1}

    retry = [{"ErrorEquals": ["Lambda.ServiceException"], "IntervalSeconds": 1, "MaxAttempts": 2, "BackoffRate": 2}]
    catch = [{"ErrorEquals": ["States.ALL"], "Next": "Caught"}]
    machine = _machine({"Call": _task(Retry=retry, Catch=catch, End=True),
                        "Caught": {"Type": "Succeed"}}, clock, flaky)
    machine.start("e1", {"n": 0})
    clock.run(until=T0 + 60)
    (execution,) = machine.executions
    failed = [(round(t - T0, 3), what) for t, _, what in execution.history if what.startswith("failed")]
    # Retried after 1 s, then 2 s (BackoffRate); the function error is not the retrier's: caught at once.
    assert failed == [(0, "failed Lambda.ServiceException"), (1, "failed Lambda.ServiceException"),
                      (3, "failed ValueError")]
    assert execution.status == "SUCCEEDED"


def test_retries_run_out_and_an_uncaught_error_fails_the_execution() -> None:
    clock = VirtualClock(T0)

    def down(payload: Any) -> Any:
        raise StatesError("Lambda.TooManyRequestsException", "throttled")

    retry = [{"ErrorEquals": ["Lambda.TooManyRequestsException"], "IntervalSeconds": 1, "MaxAttempts": 2,
              "BackoffRate": 1}]
    machine = _machine({"Call": _task(Retry=retry, End=True)}, clock, down)
    machine.start("e1", {"n": 0})
    clock.run(until=T0 + 60)
    (execution,) = machine.executions
    assert (execution.status, execution.error) == ("FAILED", "Lambda.TooManyRequestsException")
    assert [round(t - T0) for t, _, what in execution.history if what.startswith("failed")] == [0, 1, 2]


def test_an_undefined_expression_is_a_query_evaluation_error_and_states_all_catches_it() -> None:
    clock = VirtualClock(T0)
    machine = _machine({"Call": _task(Catch=[{"ErrorEquals": ["States.ALL"], "Next": "Caught"}], End=True),
                        "Caught": {"Type": "Succeed"}}, clock, lambda p: {"n": 1})
    machine.start("e1", {})  # no `n`: the Payload's expression yields nothing
    clock.run(until=T0 + 5)
    assert machine.executions[0].status == "SUCCEEDED"
    assert "failed States.QueryEvaluationError" in [what for _, _, what in machine.executions[0].history]


def test_a_malformed_timestamp_is_a_runtime_error_states_all_does_not_catch() -> None:
    clock = VirtualClock(T0)
    machine = _machine({"Call": _task(Next="Wait"),
                        "Wait": {"Type": "Wait", "Timestamp": "{% $states.input.at %}", "Next": "Call"}},
                       clock, lambda p: {"at": "2026-11-30 12:00:01"})
    machine.start("e1", {"n": 0})
    clock.run(until=T0 + 5)
    assert (machine.executions[0].status, machine.executions[0].error) == ("FAILED", "States.Runtime")


def test_an_express_execution_ends_five_minutes_after_it_started() -> None:
    clock = VirtualClock(T0)
    machine = _machine({"Call": _task(Next="Wait"), "Wait": {"Type": "Wait", "Seconds": 7, "Next": "Call"}},
                       clock, lambda p: p)
    machine.start("e1", {"n": 0}, at=T0 + 2)
    clock.run(until=T0 + 600)
    assert machine.executions[0].history[-1] == (T0 + 302, "", "TIMED_OUT")


def test_choice_conditions_read_the_simulated_clock_and_the_context() -> None:
    clock = VirtualClock(T0)
    keep = "{% $millis() < $toMillis($states.context.Execution.StartTime) + 10 * 1000 %}"
    machine = _machine({"Call": _task(Next="Wait"), "Wait": {"Type": "Wait", "Seconds": 4, "Next": "Keep"},
                        "Keep": {"Type": "Choice", "Choices": [{"Condition": keep, "Next": "Call"}], "Default": "Done"},
                        "Done": {"Type": "Succeed"}}, clock, lambda p: p)
    machine.start("e1", {"n": 0}, at=T0 + 0.25)
    clock.run(until=T0 + 60)
    calls = [round(t - T0, 2) for t, state, what in machine.executions[0].history if state == "Call"]
    assert calls == [0.25, 4.25, 8.25] and machine.executions[0].status == "SUCCEEDED"
    assert iso(T0 + 0.25) == "2026-11-30T12:00:00.250Z"


def test_a_field_it_does_not_run_is_refused_rather_than_run_wrong() -> None:
    clock = VirtualClock(T0)
    jittered = [{"ErrorEquals": ["States.ALL"], "JitterStrategy": "FULL"}]
    machine = _machine({"Call": _task(Retry=jittered, End=True)}, clock, lambda p: p)
    machine.start("e1", {"n": 0})
    with pytest.raises(NotImplementedError, match="JitterStrategy"):
        clock.run(until=T0 + 5)


# ------------------------------------------------------------------ the template's loop, with the poller's timing


def _template_loop(clock: VirtualClock, poller: Callable[[Any], Any]) -> StateMachine:
    definition = deployed_definition(transformed()["Resources"]["TickLoop"],
                                     {"PollerFunctionArn": FN, "TickLoopSeconds": 70})
    return StateMachine(definition, clock, {FN: poller}, transition=lambda: 0.02)


def _ticks_in_a_minute(poller: Callable[[VirtualClock, list[float]], Callable[[Any], Any]]) -> list[float]:
    clock, ticks = VirtualClock(T0), []
    machine = _template_loop(clock, poller(clock, ticks))
    machine.start("loop", at=T0 + 0.3)
    clock.run(until=T0 + 60.3)
    clock.stop()
    return ticks


def _half_past_poller(clock: VirtualClock, ticks: list[float]) -> Callable[[Any], Any]:
    """The poller before: no wait of its own, next_tick_at at half past the next second."""
    def invoke(payload: Any) -> Any:
        clock.sleep(0.04)  # the invoke's latency
        ticks.append(clock.time())
        following = math.floor(clock.time() - 0.5) + 1.5
        return {"next_tick_at": rfc3339(_utc(following))}
    return invoke


def _poller(clock: VirtualClock, ticks: list[float]) -> Callable[[Any], Any]:
    """The poller's timing as tickwork.dispatch.poller has it: tick at once, as of the tick point, and name the next
    whole second."""
    def invoke(payload: Any) -> Any:
        clock.sleep(0.04)
        ticks.append(tick_point(clock.time()))
        clock.sleep(0.02)  # the tick itself
        return {"next_tick_at": next_tick_at(clock.time(), math.floor(ticks[-1]))}
    return invoke


def test_a_timestamp_at_half_past_makes_the_loop_tick_back_to_back() -> None:
    ticks = _ticks_in_a_minute(_half_past_poller)
    # Each Wait for "x.500" ends at once (its second has begun): for half of every second the loop spins,
    # one tick per 100 ms here (a 40 ms invoke, three 20 ms transitions).
    assert len(ticks) > 5 * 60
    assert max(t % 1 for t in ticks) < 0.6  # ...until the tick that ends past half past


def test_the_loop_ticks_once_a_second_as_of_half_past() -> None:
    ticks = [t for t in _ticks_in_a_minute(_poller) if t < T0 + 60]  # the one of T0 + 60 ran at 60.04
    assert len(ticks) == 60
    assert {round(t % 1, 3) for t in ticks} == {TICK_OFFSET_MS / 1000}
    assert len({math.floor(t) for t in ticks}) == 60


def _utc(at: float) -> datetime:
    return datetime.fromtimestamp(at, tz=timezone.utc)

