"""The executor Lambda as the thread pool runs it: failures logged, in-flight runs counted."""
from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

from tickwork.dispatch.invoker import group_dispatches, wall_clock_ms
from tickwork.models import Dispatch, executor_event
from tickwork_local.functions import LambdaFunction

logger = logging.getLogger(__name__)

# Executor environments at once, as an account's default Lambda concurrency: a tenant's runs in flight
# (max_runs_in_flight, 500 by default) can hold at most that many waiting on a target that never answers,
# and the rest stay for the other tenants. Threads start only when invocations wait for one.
MAX_WORKERS = 1000


class ThreadPoolInvoker:
    """The Invoker of one process: runs the executor handler on a pool of threads, like many concurrent
    Lambdas (each thread one execution environment; see tickwork.runs.executor.http_client)."""

    def __init__(self, handler: Callable[[dict[str, Any], Any], Any], max_workers: int = MAX_WORKERS) -> None:
        self._handler = handler
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="executor")

    def invoke(self, dispatches: Sequence[Dispatch]) -> None:
        for group in group_dispatches(dispatches, wall_clock_ms()):
            self._pool.submit(self._run, executor_event(group))

    def _run(self, event: dict[str, Any]) -> None:
        try:
            self._handler(event, None)
        except Exception:  # an executor failure must not kill the pool; Lambda would log it the same way
            logger.exception("executor invocation failed")

    def shutdown(self, wait: bool = True) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=not wait)


class ExecutorRunner:
    """The callable ThreadPoolInvoker runs: the pool drops exceptions unread, so they are logged here."""

    def __init__(self, executor: LambdaFunction) -> None:
        self._executor = executor
        self._idle = threading.Condition()
        self._running = 0

    def __call__(self, event: dict[str, Any], _context: Any = None) -> Any:
        with self._idle:
            self._running += 1
        try:
            return self._run(event)
        finally:
            with self._idle:
                self._running -= 1
                self._idle.notify_all()

    def _run(self, event: dict[str, Any]) -> Any:
        # The executor logs each attempt's outcome itself; an exception is what nobody else would see.
        try:
            return self._executor.invoke(event)
        except Exception:
            # Lambda would retry an async invoke; locally the sweeper is the only net.
            runs = [f"{d.get('execution_id')}#{d.get('attempt')}" for d in event.get("dispatches", [])]
            logger.exception("executor failed for %s", ", ".join(runs))
            return None

    def wait_idle(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for running executors to finish; True when none is left."""
        with self._idle:
            return self._idle.wait_for(lambda: self._running == 0, timeout)


class LocalInvoker(ThreadPoolInvoker):
    """ThreadPoolInvoker plus a bounded shutdown: wait a little for in-flight runs, drop the queued ones."""

    def __init__(self, executor: LambdaFunction, max_workers: int = MAX_WORKERS) -> None:
        self.runner = ExecutorRunner(executor)
        super().__init__(self.runner, max_workers)

    def close(self, grace_seconds: float) -> bool:
        """True when every executor finished within the grace period (and its thread has exited)."""
        self.shutdown(wait=False)  # cancels dispatches not started: they stay `queued` for the sweeper
        idle = self.runner.wait_idle(grace_seconds)
        if idle:
            self.shutdown(wait=True)  # nothing is running, so this only joins the idle worker threads
        return idle
