"""Tickwork assembled for a benchmark: the real Poller, the real executor handler on a thread pool.

The poller and the executors get separate Services (separate Postgres pools), as two Lambda functions
would; they share the process, so they also share its GIL, which a deployment does not.
"""
from __future__ import annotations

import time
from typing import Any

from tickwork.poller import Poller, TickResult

from bench.harness import (
    ONCE_A_DAY,
    InProcessExecutors,
    RecordingInvoker,
    TimedInvoker,
    Workspace,
    create_jobs,
    wait_for,
)
from bench.target import Target

# The poller Lambda needs one connection per tick.
POLLER_DB_POOL = 2
WARM_UP_JOBS = 200
WARM_UP_TIMEOUT_SECONDS = 20


class TickworkRig:
    def __init__(self, ws: Workspace, workers: int, db_pool_size: int, run_executors: bool = True) -> None:
        self.executors = InProcessExecutors(ws.services(db_pool_size=db_pool_size), workers) if run_executors else None
        self.invoker = TimedInvoker(self.executors if self.executors is not None else RecordingInvoker())
        self.poller = Poller(ws.services(invoker=self.invoker, db_pool_size=POLLER_DB_POOL))

    def tick(self, now_ms: int) -> TickResult:
        return self.poller.tick(now_ms)

    def idle(self) -> bool:
        return self.executors is None or self.executors.runs_done >= self.invoker.handed

    def drain(self, timeout: float) -> bool:
        return wait_for(self.idle, timeout)

    def close(self) -> None:
        if self.executors is not None:
            self.executors.close()


def warm_up(ws: Workspace, rig: TickworkRig, target: Target) -> None:
    """Run a few hundred jobs end to end (imports, pools, keep-alive connections, caches), then forget them.

    They are due a second ago, so one tick fires them at once; their next run is tomorrow.
    """
    due_ms = (int(time.time()) - 1) * 1000
    create_jobs(ws, WARM_UP_JOBS, ONCE_A_DAY, due_ms, target.url, "warmup")
    rig.tick(int(time.time() * 1000))
    rig.drain(WARM_UP_TIMEOUT_SECONDS)
    if rig.executors is not None:
        wait_for(lambda: target.count() >= WARM_UP_JOBS, WARM_UP_TIMEOUT_SECONDS)
    target.take()
    rig.invoker.reset()


def tick_summary(result: TickResult | None) -> dict[str, Any]:
    if result is None:
        return {}
    keys = ("claimed", "dispatched", "batches", "redis_round_trips", "postgres_round_trips")
    return {key: getattr(result, key, None) for key in keys}
