"""Is the service working? Postgres and Redis answer, and a poller ticked within the last few seconds.

Each store is probed on a thread of its own and waited for a bounded time, so the answer comes in about
PROBE_TIMEOUT_SECONDS even when a store accepts connections and then hangs. At most one probe per store is
in flight: while a hung one is still out, the next check reports a timeout at once instead of tying up
another thread and another pooled connection.
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, Callable

from aws_lambda_powertools import Logger

from tickwork.dueindex.index import DueIndex

logger = Logger(child=True)

# The poller ticks every second; a few missed ticks in a row mean it has stopped.
MAX_TICK_AGE_SECONDS = 5.0
# Well inside the ~2 s a load balancer or uptime check waits, both stores probed at once.
PROBE_TIMEOUT_SECONDS = 1.0
OK, ERROR, TIMEOUT = "ok", "error", "timeout"


@dataclass(frozen=True)
class Health:
    postgres: str  # OK, ERROR or TIMEOUT
    redis: str
    last_tick_age_seconds: float | None  # None: no tick recorded, or Redis did not answer

    @property
    def ok(self) -> bool:
        return (self.postgres == OK and self.redis == OK and self.last_tick_age_seconds is not None
                and self.last_tick_age_seconds <= MAX_TICK_AGE_SECONDS)


def assess(postgres: str, redis: str, last_tick_ms: int | None, now_ms: int) -> Health:
    """The verdict from the probes' results; `now_ms` is the caller's clock."""
    age = None if last_tick_ms is None else max(now_ms - last_tick_ms, 0) / 1000
    return Health(postgres, redis, age)


class Prober:
    """Runs the store probes with a deadline (one instance per execution environment)."""

    def __init__(self, timeout: float = PROBE_TIMEOUT_SECONDS) -> None:
        self.timeout = timeout
        self._threads = ThreadPoolExecutor(max_workers=2, thread_name_prefix="tickwork-health")
        self._in_flight: dict[str, Future[Any]] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        """Stop taking probes; one still hung is left to finish (or not) on its own."""
        self._threads.shutdown(wait=False, cancel_futures=True)

    def check(self, db: Any, index: DueIndex, now_ms: int) -> Health:
        postgres = self._start("postgres", lambda: _ping_postgres(db, self.timeout))
        redis = self._start("redis", index.last_tick_ms)
        deadline = time.monotonic() + self.timeout  # one budget for both: they run at the same time
        postgres_state, _ = self._outcome("postgres", postgres, deadline)
        redis_state, last_tick_ms = self._outcome("redis", redis, deadline)
        return assess(postgres_state, redis_state, last_tick_ms, now_ms)

    def _start(self, store: str, probe: Callable[[], Any]) -> Future[Any] | None:
        with self._lock:
            previous = self._in_flight.get(store)
            if previous is not None and not previous.done():
                return None
            self._in_flight[store] = future = self._threads.submit(probe)
            return future

    def _outcome(self, store: str, future: Future[Any] | None, deadline: float) -> tuple[str, Any]:
        if future is None:
            logger.warning("health probe still hung from an earlier check", extra={"store": store})
            return TIMEOUT, None
        try:
            return OK, future.result(timeout=max(deadline - time.monotonic(), 0))
        except FutureTimeout:
            logger.warning("health probe timed out", extra={"store": store, "timeout_seconds": self.timeout})
            return TIMEOUT, None
        except Exception as exc:  # noqa: BLE001 - any failure of a store is what this check reports
            # The type only: a driver's message can carry the connection string.
            logger.warning("health probe failed", extra={"store": store, "error_type": type(exc).__name__})
            return ERROR, None


def _ping_postgres(db: Any, timeout: float) -> None:
    with db.connection(timeout=timeout) as conn:
        conn.execute("SELECT 1")
