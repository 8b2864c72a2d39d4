"""The tick loop as AWS runs it: the TickLoop definition from template.yaml (as SAM transforms it), executed
under the documented semantics by tests/statemachine.py, calling the real poller handler
(functions/poller/app.py) against real PostgreSQL and Redis, on a simulated clock.

What AWS adds around the definition, modelled here: EventBridge Scheduler starts an execution every minute,
at least once (now and then twice) and a little late; each runs TickLoopSeconds, so two loops tick side by
side for about 10 s a minute; every state transition and Lambda invoke takes tens of milliseconds, and a
loop's first invoke may meet a cold start. A simulated hour takes seconds: only the simulated clock moves,
and the poller reads and waits on it.
"""
from __future__ import annotations

import json
import math
import random
import time
from collections import Counter
from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Any, Callable

import pytest

from tests.conftest import load_handler_module
from tests.integration.helpers import due_index, insert_job
from tests.statemachine import StateMachine, StatesError, VirtualClock, deployed_definition
from tests.support import mark_built
from tests.unit.test_template_operations import transformed
from tickwork.dispatch.poller import TICK_OFFSET_MS
from tickwork.timeutil import to_ms
from tickwork.wiring import Services

POLLER_ARN = "arn:aws:lambda:us-east-1:123456789012:function:tickwork-PollerFunction"
HOUR = 3600
H0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc).timestamp()  # the measured hour starts here
WARM_UP = 150  # seconds of ticking before it, so the hour starts with loops already overlapping


class TimedInvoker:
    """The executor's invoke, recorded with the simulated time it happened at."""

    def __init__(self) -> None:
        self.clock: VirtualClock | None = None
        self.dispatched: list[tuple[float, int]] = []  # (when, the run's instant in ms)

    def invoke(self, dispatches: Any) -> None:
        assert self.clock is not None
        self.dispatched.extend((self.clock.time(), d.fire_at_ms) for d in dispatches)


@pytest.fixture
def invoker() -> TimedInvoker:
    return TimedInvoker()


class PollerLambda:
    """Lambda in front of the poller handler: invoke latency (a cold start now and then on a loop's first
    call), the handler's JSON result, and faults injected by `fault(payload)` (an error name, or None)."""

    def __init__(self, clock: VirtualClock, rng: random.Random,
                 fault: Callable[[dict[str, Any]], str | None] = lambda payload: None) -> None:
        module = load_handler_module("poller")
        module.time = SimpleNamespace(time=clock.time)  # the handler's clock is simulated
        self.handler, self.clock, self.rng, self.fault = module.handler, clock, rng, fault
        self.loops_seen: set[str] = set()
        self.ticks: list[tuple[float, bool]] = []  # (when the tick ran, whether it did the work)
        self.faults: list[tuple[float, str]] = []

    def __call__(self, payload: dict[str, Any]) -> Any:
        first = payload["loop_execution"] not in self.loops_seen
        self.loops_seen.add(payload["loop_execution"])
        self.clock.sleep(self.rng.uniform(0.2, 1.5) if first and self.rng.random() < 0.3
                         else self.rng.uniform(0.01, 0.08))
        if (error := self.fault(payload)) is not None:
            self.faults.append((self.clock.time(), error))
            if error.startswith("Lambda."):
                raise StatesError(error, "injected")  # the service failed the invoke: the function never ran
            raise RuntimeError(f"injected {error}")  # the function failed before its tick
        result = json.loads(json.dumps(self.handler(payload, None)))  # what Lambda hands back: JSON
        self.ticks.append((self.clock.time(), result["locked"]))
        self.clock.sleep(self.rng.uniform(0.005, 0.03))  # the rest of the tick, and the response
        return result


def scheduler(clock: VirtualClock, machine: StateMachine, rng: random.Random, first: float, until: float,
              late: Callable[[], float]) -> Callable[[], None]:
    """EventBridge Scheduler, rate(1 minute), FlexibleTimeWindow OFF: a start a minute, each `late()` after
    its minute; at least once, so now and then the same start is delivered twice."""
    def run() -> None:
        minute = 0
        while first + 60 * minute < until:
            due = first + 60 * minute + late()
            machine.start(f"loop-{minute}", at=due)
            if rng.random() < 0.1:
                machine.start(f"loop-{minute}-again", at=due + rng.uniform(0.05, 5.0))
            minute += 1
            clock.sleep(first + 60 * minute - clock.time())
    return run


def _loop_seconds() -> int:
    return int(transformed()["Parameters"]["TickLoopSeconds"]["Default"])


def simulate(services: Services, invoker: TimedInvoker, seconds: int, seed: int,
             fault: Callable[[dict[str, Any]], str | None] = lambda payload: None,
             late: Callable[[random.Random], float] = lambda rng: rng.uniform(0.0, 2.0)) -> SimpleNamespace:
    """Tick from WARM_UP seconds before H0 to `seconds` after it; a job fires every second from H0 on."""
    rng = random.Random(seed)
    clock = VirtualClock(H0 - WARM_UP)
    invoker.clock = clock
    insert_job(services, schedule="* * * * * *", next_run_at=datetime.fromtimestamp(H0, tz=timezone.utc))
    mark_built(due_index(services), to_ms(datetime.fromtimestamp(H0 - WARM_UP, tz=timezone.utc)))
    poller = PollerLambda(clock, rng, fault)
    definition = deployed_definition(transformed()["Resources"]["TickLoop"],
                                     {"PollerFunctionArn": POLLER_ARN, "TickLoopSeconds": _loop_seconds()})
    machine = StateMachine(definition, clock, {POLLER_ARN: poller}, transition=lambda: rng.uniform(0.005, 0.05))
    first_start = H0 - WARM_UP + 17.3  # Scheduler keeps its own second within the minute
    clock.spawn(scheduler(clock, machine, rng, first_start, H0 + seconds, lambda: late(rng)))
    began = time.perf_counter()
    try:
        clock.run(until=H0 + seconds + 2 * _loop_seconds())
    finally:
        clock.stop()
    return SimpleNamespace(poller=poller, machine=machine, wall=time.perf_counter() - began)


def _working_ticks_per_second(ticks: list[tuple[float, bool]], seconds: int) -> Counter[int]:
    worked = Counter(math.floor(at) for at, locked in ticks if locked)
    return Counter({second: worked[second] for second in range(int(H0), int(H0) + seconds)})


def _slots_dispatched(invoker: TimedInvoker, seconds: int) -> Counter[int]:
    return Counter(fire for _, fire in invoker.dispatched if H0 * 1000 <= fire < (H0 + seconds) * 1000)


def test_a_simulated_hour_ticks_once_every_second_as_of_half_past(services: Services, invoker: TimedInvoker) -> None:
    run = simulate(services, invoker, HOUR, seed=21)
    per_second = _working_ticks_per_second(run.poller.ticks, HOUR)
    ticks = sum(per_second.values())
    invocations = sum(1 for at, _ in run.poller.ticks if H0 <= at < H0 + HOUR)
    print(f"\nticks per simulated hour: {ticks} (poller invocations {invocations}, "
          f"executions {len(run.machine.executions)}, {run.wall:.1f} s of wall time)")
    assert abs(ticks - HOUR) <= HOUR // 100
    assert [s for s, n in per_second.items() if n == 0] == [], "seconds without a tick"
    assert [s for s, n in per_second.items() if n > 1] == [], "seconds ticked twice"
    # Every tick that worked ran as its Wait ended, before the point of its second it claims as of...
    assert max(at % 1 for at, locked in run.poller.ticks if locked and at >= H0) < TICK_OFFSET_MS / 1000
    # ...so each slot of the job went to an executor once, 1.5 s ahead of that point (the lookahead from
    # half past), at most 2 s ahead of its instant.
    slots = _slots_dispatched(invoker, HOUR)
    assert set(slots) == {int(H0 + s) * 1000 for s in range(HOUR)} and set(slots.values()) == {1}
    ahead = [fire / 1000 - at for at, fire in invoker.dispatched if fire >= H0 * 1000]
    assert 1.5 < min(ahead) and max(ahead) <= 2.0
    # Loops overlapped (two at once, and Scheduler's duplicates) and each ran its TickLoopSeconds.
    assert {e.status for e in run.machine.executions} == {"SUCCEEDED"}
    assert any(name.endswith("-again") for name in (e.name for e in run.machine.executions))
    assert invocations > HOUR * 1.05
    assert run.wall < 300


def test_failed_ticks_and_late_starts_cost_their_seconds_and_nothing_more(
    services: Services, invoker: TimedInvoker,
) -> None:
    """Break: invokes the Lambda service fails (retried 1 s later by the Task's Retry) and ticks whose
    function fails (caught, then Backoff 1 s), a few per minute; Scheduler delivering starts up to 9 s late.
    Must hold: no execution fails or times out, no second is ticked twice, a second goes without a tick only
    where a fault struck it, and every slot still reaches an executor exactly once."""
    rng = random.Random(7)

    def fault(payload: dict[str, Any]) -> str | None:
        draw = rng.random()
        return "Lambda.ServiceException" if draw < 0.02 else "RedisTimeoutError" if draw < 0.04 else None

    seconds = 900
    run = simulate(services, invoker, seconds, seed=8, fault=fault, late=lambda r: r.uniform(0.0, 9.0))
    per_second = _working_ticks_per_second(run.poller.ticks, seconds)
    struck = {math.floor(at) for at, _ in run.poller.faults}
    print(f"\nticks in {seconds} simulated seconds: {sum(per_second.values())}, faults injected "
          f"{len(run.poller.faults)}, seconds without a tick {sum(1 for n in per_second.values() if n == 0)}")
    assert len(run.poller.faults) >= 20
    assert {e.status for e in run.machine.executions} == {"SUCCEEDED"}
    assert [s for s, n in per_second.items() if n > 1] == []
    missing = {s for s, n in per_second.items() if n == 0}
    assert missing <= struck, sorted(missing - struck)
    slots = _slots_dispatched(invoker, seconds)
    assert set(slots) == {int(H0 + s) * 1000 for s in range(seconds)} and set(slots.values()) == {1}
