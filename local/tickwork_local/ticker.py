"""The Step Functions loop, locally: call the poller at every whole second of wall-clock time.

The same class, with a period of a minute and the maintenance event, stands in for the EventBridge
schedule that runs maintenance in AWS: a thread of its own, so a long pass never delays a tick.
"""
from __future__ import annotations

import logging
import math
import threading
import time
from typing import Any, Callable

from tickwork.dispatch.poller import TICK_OFFSET_MS
from tickwork_local.functions import LambdaFunction

logger = logging.getLogger(__name__)

EVENT_SOURCE = "tickwork-local"


MAINTENANCE_PERIOD_SECONDS = 60.0
MAINTENANCE_EVENT = {"task": "maintenance"}


def next_boundary(now: float, period: float = 1.0, offset: float = 0.0) -> float:
    """The first `offset` past a period boundary strictly after `now`: a tick that overran skips ahead,
    never bunches up."""
    return (math.floor((now - offset) / period) + 1.0) * period + offset


class Ticker:
    def __init__(
        self, poller: LambdaFunction, clock: Callable[[], float] = time.time, period: float = 1.0,
        event: dict[str, Any] | None = None, name: str = "tickwork-ticker",
    ) -> None:
        self._poller = poller
        self._clock = clock
        self._period = period
        # Ticks land where the Step Functions loop puts them (tickwork.dispatch.poller.next_tick_at).
        self._offset = TICK_OFFSET_MS / 1000 if event is None else 0.0
        self._event = event
        self._stop = threading.Event()
        self._held_until = 0.0  # wall-clock seconds: ticks before it are not sent (hold)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def hold(self, seconds: float) -> None:
        """Send no tick for `seconds` from now, as a stalled loop (a deploy, a Redis failover, one slow tick)
        leaves the poller idle; ticking resumes at the first boundary after."""
        self._held_until = self._clock() + seconds

    def _run(self) -> None:
        tick = 0
        while self._sleep_until(next_boundary(self._clock(), self._period, self._offset)):
            if self._clock() < self._held_until:
                continue
            tick += 1
            self._tick(tick)

    def _sleep_until(self, deadline: float) -> bool:
        """Wait for the wall clock to reach `deadline`; False when stopped first.

        Loops because Event.wait runs on the monotonic clock and may wake a hair before the wall clock
        reaches the second, which would make the next boundary the same second.
        """
        while (remaining := deadline - self._clock()) > 0:
            if self._stop.wait(remaining):
                return False
        return not self._stop.is_set()

    def _tick(self, number: int) -> None:
        # The poller logs its own line when a tick dispatched something; only failures are the loop's.
        try:
            self._poller.invoke(self._event or {"source": EVENT_SOURCE, "tick": number})
        except Exception:  # the loop must outlive a failed tick, as the state machine's retry does
            logger.exception("poller invocation %d (%s) failed", number, self._event or "tick")
