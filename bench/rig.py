"""Tickwork assembled for a benchmark: the real Poller, the real executor handler on a thread pool.

The poller and the executors get separate Services (separate Postgres pools), as two Lambda functions
would. With executor_processes=0 the executors are threads of the poller's process (as `make dev` runs
them), so they share its GIL, which a deployment does not; with N > 0 they run in N worker processes
of their own (bench/executors.py), each with its own Services.
"""
from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

from bench import steps
from bench.executors import ProcessExecutors
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
from tickwork.dispatch.poller import Poller, TickResult
from tickwork_local.sending import SharedSender

# The poller Lambda needs one connection per tick.
POLLER_DB_POOL = 2
WARM_UP_JOBS = 200
WARM_UP_TIMEOUT_SECONDS = 20


log = logging.getLogger("bench.rig")


class TickworkRig:
    def __init__(
        self, ws: Workspace, workers: int, db_pool_size: int, run_executors: bool = True, executor_processes: int = 0,
    ) -> None:
        """executor_processes: 0 runs the executors on threads of this process (as `make dev` does), N > 0
        in N worker processes (`workers` and `db_pool_size` are then shared out among them)."""
        self.executors: InProcessExecutors | ProcessExecutors | None = None
        if run_executors and executor_processes > 0:
            self.executors = ProcessExecutors(ws.settings, executor_processes, workers, db_pool_size)
        elif run_executors:
            svc = ws.services(db_pool_size=db_pool_size, sender=SharedSender())  # as `make dev` sends
            self.executors = InProcessExecutors(svc, workers)
        self.invoker = TimedInvoker(self.executors if self.executors is not None else RecordingInvoker())
        try:
            self.poller = Poller(ws.services(invoker=self.invoker, db_pool_size=POLLER_DB_POOL))
        except BaseException:
            self.close()
            raise

    def tick(self, now_ms: int) -> TickResult:
        return self.poller.tick(now_ms)

    def idle(self) -> bool:
        return self.executors is None or self.executors.runs_done >= self.invoker.handed

    def drain(self, timeout: float) -> bool:
        return wait_for(self.idle, timeout)

    def runs_by_process(self) -> list[int] | None:
        """Runs each executor process did since the warm-up (how evenly the queue shared them out)."""
        if not isinstance(self.executors, ProcessExecutors):
            return None
        return sorted(self.executors.pool.done_by_pid.values(), reverse=True)

    def close(self) -> None:
        if self.executors is not None:
            self.executors.close()


def warm_up(ws: Workspace, rig: TickworkRig, target: Target) -> None:
    """Run a few hundred jobs end to end (imports, pools, keep-alive connections, caches), then forget them.

    They are due a second ago, so one tick fires them at once; their next run is tomorrow. With executor
    processes, the tick's invocations are spread so that every process runs its share.
    """
    due_ms = (int(time.time()) - 1) * 1000
    create_jobs(ws, WARM_UP_JOBS, ONCE_A_DAY, due_ms, target.url, "warmup")
    with rig.executors.spreading() if rig.executors is not None else contextlib.nullcontext():
        rig.tick(int(time.time() * 1000))
    rig.drain(WARM_UP_TIMEOUT_SECONDS)
    if rig.executors is not None:
        wait_for(lambda: target.count() >= WARM_UP_JOBS, WARM_UP_TIMEOUT_SECONDS)
    if isinstance(rig.executors, ProcessExecutors) and rig.executors.processes_used() < rig.executors.processes:
        log.warning("warm-up reached only some executor processes")
    target.take()
    rig.invoker.reset()
    if rig.executors is not None:
        rig.executors.reset()
    if steps.enabled():
        steps.reset_all()  # this process's step timers (bench/steps.py), in either executor mode


def tick_summary(result: TickResult | None) -> dict[str, Any]:
    if result is None:
        return {}
    keys = ("claimed", "dispatched", "delayed", "batches", "redis_round_trips", "postgres_round_trips")
    return {key: getattr(result, key, None) for key in keys}
