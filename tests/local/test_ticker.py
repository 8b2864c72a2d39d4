"""The local stand-ins for the Step Functions loop and the maintenance schedule: boundaries and events."""
from __future__ import annotations

import threading
from typing import Any

from tickwork_local.ticker import MAINTENANCE_EVENT, Ticker, next_boundary


def test_next_boundary_is_strictly_after_now_on_the_period() -> None:
    assert next_boundary(100.0) == 101.0
    assert next_boundary(100.7) == 101.0
    assert next_boundary(100.0, 60.0) == 120.0
    assert next_boundary(179.9, 60.0) == 180.0
    assert next_boundary(100.2, 1.0, 0.5) == 100.5
    assert next_boundary(100.5, 1.0, 0.5) == 101.5


class JumpingClock:
    """Wall time that moves 61 s each time it is read, so every wait is already over: no real sleep."""

    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        self.now += 61.0
        return self.now


class RecordingFunction:
    def __init__(self, clock: JumpingClock, stop_after: int) -> None:
        self.events: list[tuple[float, dict[str, Any]]] = []
        self.clock = clock
        self.stop_after = stop_after
        self.done = threading.Event()

    def invoke(self, event: dict[str, Any]) -> Any:
        self.events.append((self.clock.now, event))
        if len(self.events) >= self.stop_after:
            self.done.set()


def test_maintenance_ticker_sends_its_event_on_minute_boundaries() -> None:
    clock = JumpingClock(1_000.5)
    function = RecordingFunction(clock, stop_after=2)
    ticker = Ticker(function, clock=clock, period=60.0, event=MAINTENANCE_EVENT,  # type: ignore[arg-type]
                    name="test-maintenance")
    ticker.start()
    assert function.done.wait(5)
    ticker.stop(timeout=5)
    assert [event for _, event in function.events[:2]] == [MAINTENANCE_EVENT, MAINTENANCE_EVENT]
    # Each call comes once the clock has passed a new minute boundary, never twice within one minute.
    minutes = [at // 60 for at, _ in function.events[:2]]
    assert minutes[1] > minutes[0]
