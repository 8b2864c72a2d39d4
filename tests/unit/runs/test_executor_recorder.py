"""The recorder of an executor group: results that arrive together share one write, a late one waits
for no one. Margins are wide both ways: the verdicts do not depend on the machine's speed."""
from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from tickwork.models import Dispatch
from tickwork.runs import executor


class Recording:
    """Stands in for the Executor: what each write held."""

    def __init__(self) -> None:
        self.writes: list[list[Any]] = []

    def record(self, batch: list[Any]) -> dict[str, str]:
        self.writes.append(list(batch))
        return {item: "succeeded" for item in batch}


def recorder(recording: Recording) -> tuple[Any, threading.Thread]:
    group = executor._Group(recording, [], {})  # type: ignore[arg-type]
    thread = threading.Thread(target=group._record_results)
    thread.start()
    return group, thread


def test_results_arriving_within_the_linger_share_one_write(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executor, "RECORD_LINGER_SECONDS", 30.0)
    recording = Recording()
    group, thread = recorder(recording)
    group.put("first")
    time.sleep(0.1)  # the next answer comes a moment later: before, each got a write of its own
    group.put("second")
    group.results.put(None)  # the group is done: nothing more to wait for
    thread.join(10)
    assert not thread.is_alive() and recording.writes == [["first", "second"]]
    assert group.outcomes == {"first": "succeeded", "second": "succeeded"}


def test_a_result_after_the_linger_is_written_on_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executor, "RECORD_LINGER_SECONDS", 0.05)
    recording = Recording()
    group, thread = recorder(recording)
    group.put("fast")
    deadline = time.monotonic() + 10
    while not recording.writes and time.monotonic() < deadline:  # written without waiting for "slow"
        time.sleep(0.01)
    assert recording.writes == [["fast"]]
    group.put("slow")
    group.results.put(None)
    thread.join(10)
    assert recording.writes == [["fast"], ["slow"]]


class InFlightPlaces:
    """Stands in for the runs-in-flight index: which runs each give-back freed, in order."""

    def __init__(self) -> None:
        self.releases: list[list[str]] = []

    def release(self, dispatches: list[Dispatch]) -> None:
        self.releases.append([d.execution_id for d in dispatches])


class RecordingWithPlaces(Recording):
    def __init__(self) -> None:
        super().__init__()
        self.svc = SimpleNamespace(in_flight=InFlightPlaces())


def placed_recorder(recording: RecordingWithPlaces, runs: list[str]) -> tuple[Any, threading.Thread]:
    dispatches = [Dispatch(run, 1, 0, tenant_id="t") for run in runs]
    group = executor._Group(recording, dispatches, {})  # type: ignore[arg-type]
    thread = threading.Thread(target=group._record_results)
    thread.start()
    return group, thread


def written(recording: Recording, count: int) -> bool:
    deadline = time.monotonic() + 10
    while len(recording.writes) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    return len(recording.writes) >= count


def test_the_first_write_gives_its_places_back_at_once_and_later_ones_together(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A group's answers are written a few at a time: a Redis call for each write cost the executor a quarter of
    the writes' own CPU at the 10,000-run instant (issue 33). Before: [['r1'], ['r2'], ['r3']]."""
    monkeypatch.setattr(executor, "RECORD_LINGER_SECONDS", 0.0)
    monkeypatch.setattr(executor, "GIVE_BACK_EVERY_SECONDS", 30.0)
    recording = RecordingWithPlaces()
    group, thread = placed_recorder(recording, ["r1", "r2", "r3"])
    for n, run in enumerate(["r1", "r2", "r3"], start=1):
        group.put(run)
        assert written(recording, n)
    assert recording.svc.in_flight.releases == [["r1"]]
    group.results.put(None)
    thread.join(10)
    assert recording.svc.in_flight.releases == [["r1"], ["r2", "r3"]]
    assert group.given_back == {"r1", "r2", "r3"}


def test_a_place_waiting_to_be_given_back_goes_back_in_time_without_another_write(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The group's other run waits on a slow target: the written run's place must not wait for it."""
    monkeypatch.setattr(executor, "RECORD_LINGER_SECONDS", 0.0)
    monkeypatch.setattr(executor, "GIVE_BACK_EVERY_SECONDS", 0.2)
    recording = RecordingWithPlaces()
    group, thread = placed_recorder(recording, ["r1", "r2", "slow"])
    group.put("r1")
    assert written(recording, 1)
    group.put("r2")
    deadline = time.monotonic() + 10
    while len(recording.svc.in_flight.releases) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert thread.is_alive() and recording.svc.in_flight.releases == [["r1"], ["r2"]]
    group.results.put(None)
    thread.join(10)
    assert recording.svc.in_flight.releases == [["r1"], ["r2"]]
