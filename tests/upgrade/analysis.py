"""What the upgrade test's window delivered, slot by slot: lost and duplicated runs, lateness per phase, and
which release's poller did each second's tick."""
from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Iterable, Mapping, Sequence

from tests.upgrade.target import Arrival


@dataclass(frozen=True)
class Phase:
    name: str
    begins: float  # wall clock
    mixed: bool


@dataclass(frozen=True)
class Run:
    """An execution as Postgres holds it."""

    id: str
    job_id: str
    scheduled_for: datetime
    trigger: str
    status: str


@dataclass
class Delivery:
    """Every run of some jobs over a window of whole seconds, as the target received them."""

    expected: set[tuple[str, int]] = field(default_factory=set)  # (job id, slot second)
    lost: list[tuple[str, int]] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)  # "<run id>#<attempt>" received more than once
    extra_runs: list[tuple[str, int]] = field(default_factory=list)  # slots sent under two run ids
    lateness: list[tuple[int, float]] = field(default_factory=list)  # (slot second, seconds late)


def slots(jobs: Iterable[str], first: int, last: int, every: int = 1) -> set[tuple[str, int]]:
    return {(job, second) for job in jobs for second in range(first, last + 1) if second % every == 0}


def delivery(expected: set[tuple[str, int]], arrivals: Sequence[Arrival], runs: Mapping[str, Run],
             attempts: Iterable[int] = (1,)) -> Delivery:
    """Each expected slot must have arrived once for each of `attempts`, under one run id."""
    jobs = {job for job, _ in expected}
    result = Delivery(expected=expected)
    received: Counter[tuple[str, int]] = Counter()
    ids_of_slot: dict[tuple[str, int], set[str]] = defaultdict(set)
    for arrival in arrivals:
        run = runs.get(arrival.run_id)
        if run is None or run.job_id not in jobs or run.trigger != "schedule":
            continue
        slot = (run.job_id, int(run.scheduled_for.timestamp()))
        received[(arrival.run_id, arrival.attempt)] += 1
        ids_of_slot[slot].add(arrival.run_id)
        if arrival.attempt == 1 and received[(arrival.run_id, 1)] == 1:
            result.lateness.append((slot[1], arrival.at - run.scheduled_for.timestamp()))
    for slot in sorted(expected):
        ids = ids_of_slot.get(slot, set())
        if len(ids) > 1:
            result.extra_runs.append(slot)
        if not ids or any(not any(received[(run_id, n)] for run_id in ids) for n in attempts):
            result.lost.append(slot)
    result.duplicated = sorted(f"{run_id}#{n}" for (run_id, n), count in received.items() if count > 1)
    return result


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    return ordered[min(len(ordered) - 1, math.ceil(share * len(ordered)) - 1)]


def by_phase(lateness: Sequence[tuple[int, float]], phases: Sequence[Phase], ends: float) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {phase.name: [] for phase in phases}
    bounds = [phase.begins for phase in phases[1:]] + [ends]
    for second, late in lateness:
        for phase, until in zip(phases, bounds):
            if phase.begins <= second < until:
                found[phase.name].append(late)
    return found


def tick_second(logged_at: float) -> int:
    """The second a working tick belongs to: it starts half past it and logs once done (ticks up to 750 ms)."""
    return math.floor(logged_at - 0.25)


def ticks_per_second(ticks: Mapping[str, Sequence[float]], first: int, last: int) -> dict[int, list[str]]:
    """Which runtimes did a working tick in each second from `first` to `last`.

    A tick logs when it is done, so one that overran 750 ms on a loaded machine logs in the next second's
    span, beside that second's own tick. It is given the second before instead when no tick has it: the
    loop is once a second, so a tick that ran long leaves that second empty, while two pollers working one
    second leave no such gap (and the count of ticks would exceed the seconds)."""
    found: dict[int, list[str]] = {second: [] for second in range(first - 1, last + 1)}
    for at, label in sorted((at, label) for label, logged in ticks.items() for at in logged):
        second = tick_second(at)
        if second in found and found[second] and not found.get(second - 1, [None]):
            second -= 1
        if second in found:
            found[second].append(label)
    found.pop(first - 1)
    return found
