"""The recorder of an executor group: results that arrive together share one write, a late one waits
for no one. Margins are wide both ways: the verdicts do not depend on the machine's speed."""
from __future__ import annotations

import threading
import time
from typing import Any

import pytest

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
