"""The tick loop replaced while it ticks, as a deploy replaces it: the state machine gets a new definition and
the poller function new code while loops are running, on the simulated clock of tests/integration/dispatch/
test_tick_loop.py (the definitions run by tests/statemachine.py, the real poller handler on real PostgreSQL
and Redis).

What an update does, in the order template.yaml gives CloudFormation (SchemaMigration first; PollerFunction
depends on it; TickLoop references the poller's ARN, so it changes after it; TickLoopSchedule keeps
starting a loop a minute):
- the poller function's code is replaced: invocations already running finish on the old environment; for a
  short while after (Lambda's update window, modelled as 20 s) an invocation may reach an old or a new
  environment; after it, only new ones, each cold on its first call;
- the state machine's definition is replaced (UpdateStateMachine): executions already running keep the
  definition they started with; for a few seconds an execution started may still get the old one (the
  update is eventually consistent), after that the new one. Old and new definitions tick side by side
  until the old loops end.
The old definition is the baseline release's (template.yaml at commit 26fd9f7, from this repository's
history); the new one is this tree's, deployed with another TickLoopSeconds, as an operator may change it in
the same deploy (so the two definitions differ and their loops overlap longer).
"""
from __future__ import annotations

import json
import random
import subprocess
import tempfile
from datetime import datetime, timezone
from typing import Any

import pytest
from cfnlint.decode import decode

from tests.conftest import ROOT
from tests.integration.dispatch.test_tick_loop import (
    H0, POLLER_ARN, WARM_UP, PollerLambda, TimedInvoker, _loop_seconds, _slots_dispatched, _working_ticks_per_second,
    scheduler)
from tests.integration.helpers import due_index, insert_job
from tests.statemachine import StateMachine, VirtualClock, deployed_definition
from tests.support import mark_built
from tests.unit.test_template_operations import transform_source, transformed
from tickwork.timeutil import to_ms
from tickwork.wiring import Services

BASELINE_COMMIT = "26fd9f7"
SECONDS = 600
FUNCTION_UPDATED = H0 + 240.3  # when the poller's new code is in place
MACHINE_UPDATED = FUNCTION_UPDATED + 6.1  # CloudFormation goes on to the state machine once the function is updated
LAMBDA_MIXING_SECONDS = 20.0
MACHINE_MIXING_SECONDS = 5.0
NEW_LOOP_SECONDS = 130


@pytest.fixture
def invoker() -> TimedInvoker:
    return TimedInvoker()


def baseline_tick_loop() -> dict[str, Any]:
    """The TickLoop resource of the baseline's template as SAM transforms it."""
    text = subprocess.run(["git", "show", f"{BASELINE_COMMIT}:template.yaml"], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as file:
        file.write(text)
        file.flush()
        source, matches = decode(file.name)
    assert not matches and source is not None
    return json.loads(transform_source(json.dumps(source)))["Resources"]["TickLoop"]


class UpdatedFunction:
    """PollerFunction across the update: old environments, then (after a window when either may answer) new
    ones, which are cold on the first call each loop makes to them."""

    def __init__(self, clock: VirtualClock, old: PollerLambda, new: PollerLambda, rng: random.Random) -> None:
        self.clock, self.old, self.new, self.rng = clock, old, new, rng
        self.cold: set[str] = set()

    def __call__(self, payload: dict[str, Any]) -> Any:
        now = self.clock.time()
        fresh = now >= FUNCTION_UPDATED + LAMBDA_MIXING_SECONDS or (
            now >= FUNCTION_UPDATED and self.rng.random() < (now - FUNCTION_UPDATED) / LAMBDA_MIXING_SECONDS)
        if not fresh:
            return self.old(payload)
        if payload["loop_execution"] not in self.cold:
            self.cold.add(payload["loop_execution"])
            self.clock.sleep(self.rng.uniform(0.4, 1.2))  # a new environment's init: the layer, the clients
        return self.new(payload)


class ReplacedMachine:
    """What the schedule's StartExecution reaches: the old definition before the update, then for a few
    seconds either, then the new one."""

    def __init__(self, old: StateMachine, new: StateMachine, rng: random.Random) -> None:
        self.old, self.new, self.rng = old, new, rng

    def start(self, name: str, input: Any = None, at: float | None = None) -> None:
        assert at is not None
        settled = at >= MACHINE_UPDATED + MACHINE_MIXING_SECONDS or (at >= MACHINE_UPDATED and self.rng.random() < 0.5)
        (self.new if settled else self.old).start(name, input, at)


def simulate_update(services: Services, invoker: TimedInvoker, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    clock = VirtualClock(H0 - WARM_UP)
    invoker.clock = clock
    insert_job(services, schedule="* * * * * *", next_run_at=datetime.fromtimestamp(H0, tz=timezone.utc))
    mark_built(due_index(services), to_ms(datetime.fromtimestamp(H0 - WARM_UP, tz=timezone.utc)))
    old_poller, new_poller = PollerLambda(clock, rng), PollerLambda(clock, rng)
    function = UpdatedFunction(clock, old_poller, new_poller, rng)

    def machine(resource: dict[str, Any], loop_seconds: int) -> StateMachine:
        definition = deployed_definition(resource, {"PollerFunctionArn": POLLER_ARN, "TickLoopSeconds": loop_seconds})
        return StateMachine(definition, clock, {POLLER_ARN: function}, transition=lambda: rng.uniform(0.005, 0.05))

    old = machine(baseline_tick_loop(), _loop_seconds())
    new = machine(transformed(TickLoopSeconds=str(NEW_LOOP_SECONDS))["Resources"]["TickLoop"], NEW_LOOP_SECONDS)
    assert old.definition != new.definition
    starts = ReplacedMachine(old, new, rng)
    clock.spawn(scheduler(clock, starts, rng, H0 - WARM_UP + 17.3, H0 + SECONDS,  # type: ignore[arg-type]
                          lambda: rng.uniform(0.0, 2.0)))
    try:
        clock.run(until=H0 + SECONDS + 2 * NEW_LOOP_SECONDS)
    finally:
        clock.stop()
    return {"old": old, "new": new, "old_poller": old_poller, "new_poller": new_poller}


def test_a_deploy_that_replaces_the_loop_and_the_poller_ticks_each_second_once(
    services: Services, invoker: TimedInvoker,
) -> None:
    run = simulate_update(services, invoker, seed=32)
    ticks = run["old_poller"].ticks + run["new_poller"].ticks
    per_second = _working_ticks_per_second(ticks, SECONDS)
    print(f"\nold loops {len(run['old'].executions)}, new loops {len(run['new'].executions)}; working ticks of the "
          f"old code {sum(locked for _, locked in run['old_poller'].ticks)}, of the new "
          f"{sum(locked for _, locked in run['new_poller'].ticks)}")
    # One working tick in every second, across the update: never two, never none.
    assert [s for s, n in per_second.items() if n != 1] == []
    # Every slot of the job went to an executor once, ahead of its instant.
    slots = _slots_dispatched(invoker, SECONDS)
    assert set(slots) == {int(H0 + s) * 1000 for s in range(SECONDS)} and set(slots.values()) == {1}
    assert min(fire / 1000 - at for at, fire in invoker.dispatched if fire >= H0 * 1000) > 0.5
    # Both definitions ran, side by side after the update: loops of the old one still ticking once new ones ran.
    assert {e.status for e in run["old"].executions + run["new"].executions} == {"SUCCEEDED"}
    new_began = min(e.started for e in run["new"].executions)
    assert any(e.started < MACHINE_UPDATED and e.history[-1][0] > new_began for e in run["old"].executions)
    assert all(e.started >= MACHINE_UPDATED for e in run["new"].executions)
    # Both codes ticked, the old one's last working tick inside Lambda's window, the new one's first at its start.
    worked = {name: [at for at, locked in run[name].ticks if locked] for name in ("old_poller", "new_poller")}
    assert max(worked["old_poller"]) < FUNCTION_UPDATED + LAMBDA_MIXING_SECONDS + 1
    assert FUNCTION_UPDATED <= min(worked["new_poller"]) < FUNCTION_UPDATED + LAMBDA_MIXING_SECONDS

