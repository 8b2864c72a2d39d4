"""Executors in processes of their own: the poller's process no longer lends them its GIL.

In AWS every executor invocation runs in its own execution environment. WorkerProcesses comes closer
than a thread pool in the poller's process: N spawned processes, each with its own clients (its own
Postgres pool, Redis client and HTTP pool) and a pool of threads, take work from one shared queue, so
whichever process has a free thread takes the next item (load-balanced, as Lambda hands an event to
any free environment). The parent only puts items on the queue (pickling and writing happen in the
queue's feeder thread), so a tick never waits for the children.

ProcessExecutors is Tickwork's executor Lambda on such processes: the parent groups dispatches as the
real invoker does (tickwork.dispatch.invoker.group_dispatches) and sends each group as the executor's event;
each child decodes it and runs tickwork.runs.executor.handle_event against its own Services, which send
through the local runtime's GatedSender (a child runs many invocations at once, as `make dev` does).
The baseline runs its per-job tasks on the same kind of processes (bench/baseline_0cron.py).

Children report back on a second queue: ready, every item done (with how many runs), and at close the
warnings they logged (a LogTally) and how many lines Tickwork wrote to their stdout (EMF metrics),
which are merged into the parent's tally and stdout sink so the report counts them as before.
"""
from __future__ import annotations

import contextlib
import logging
import math
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterator, Protocol, Sequence

from bench import steps
from bench.harness import LineSink, LogTally, capture_logs
from tickwork.dispatch.invoker import group_dispatches, wall_clock_ms
from tickwork.models import Dispatch, executor_event
from tickwork.settings import Settings

# A child's thread pool is never narrower than this, however many processes share the workers.
MIN_WIDTH = 8
# Nor its Postgres pool smaller than this.
MIN_DB_POOL = 4
START_TIMEOUT_SECONDS = 60.0
# During a warm-up each child takes one item per round and waits for the others at a barrier.
BARRIER_TIMEOUT_SECONDS = 10.0
CLOSE_TIMEOUT_SECONDS = 30.0
JOIN_TIMEOUT_SECONDS = 5.0

log = logging.getLogger("bench.executors")


class Handler(Protocol):
    """What a child builds once (its clients) and then runs for every item, on its threads."""

    def handle(self, payload: Any) -> None: ...

    def close(self) -> None: ...


def split(total: int, processes: int, least: int) -> int:
    """Each process's share of a pool of `total` (workers, connections), at least `least`."""
    return max(least, math.ceil(total / processes))


# ---------------------------------------------------------------- the child


def _child(
    setup: Callable[[Any], Handler], setup_arg: Any, width: int, tasks: Any, results: Any, barrier: Any,
) -> None:
    """A worker process: build the handler, then run queued items on `width` threads until a None."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it closes us
    _exit_with_parent()
    pid = os.getpid()
    tally = capture_logs()
    sink = LineSink()
    sys.stdout = sink  # EMF metric lines: counted, not sprayed over the parent's table
    if steps.enabled():
        steps.install()
    try:
        handler = setup(setup_arg)
    except Exception as exc:
        results.put(("failed", pid, repr(exc)))
        return
    results.put(("ready", pid))
    slots = threading.BoundedSemaphore(width)

    def run(payload: Any, runs: int) -> None:
        error = None
        try:
            if payload == steps.RESET:
                steps.reset()
            elif payload is not None:
                handler.handle(payload)
        except Exception as exc:
            error = repr(exc)
        finally:
            slots.release()
            results.put(("done", pid, runs, error))

    pool = ThreadPoolExecutor(max_workers=width, thread_name_prefix="worker")
    while True:
        slots.acquire()  # take an item only with a thread free for it: the others stay for other processes
        item = tasks.get()
        if item is None:
            break
        payload, runs, synced = item
        if synced:
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait(BARRIER_TIMEOUT_SECONDS)
        pool.submit(run, payload, runs)
    pool.shutdown(wait=True)
    handler.close()
    results.put(("closed", pid, dict(tally.counts), tally.examples, sink.lines,
                 steps.snapshot() if steps.enabled() else None))


def _exit_with_parent() -> None:
    """A parent killed outright sends no sentinel: don't outlive it (the queue would block forever)."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        multiprocessing.connection.wait([parent.sentinel])
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


# ---------------------------------------------------------------- the parent


class WorkerProcesses:
    """N spawned processes running `setup(setup_arg).handle(payload)` for each submitted item."""

    def __init__(self, setup: Callable[[Any], Handler], setup_arg: Any, processes: int, width: int,
                 name: str) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.processes = processes
        self.width = width
        self._tasks = ctx.Queue()
        self._results = ctx.Queue()
        self._barrier = ctx.Barrier(processes)
        self._children = [
            ctx.Process(target=_child, args=(setup, setup_arg, width, self._tasks, self._results, self._barrier),
                        name=f"bench-{name}-{i}", daemon=True)
            for i in range(processes)
        ]
        self._lock = threading.Condition()
        self._ready: set[int] = set()
        self._closed: set[int] = set()
        self._failed: list[str] = []
        self._spread: list[tuple[Any, int]] | None = None
        self.runs_done = 0
        self.done_by_pid: Counter[int] = Counter()
        self.errors: list[str] = []
        self._reader = threading.Thread(target=self._read, name=f"bench-{name}-results", daemon=True)

    def start(self) -> WorkerProcesses:
        self._reader.start()
        for child in self._children:
            child.start()
        with self._lock:
            ready = self._lock.wait_for(lambda: len(self._ready) == self.processes or self._failed,
                                        START_TIMEOUT_SECONDS)
        if self._failed or not ready:
            self.close()
            raise RuntimeError(f"worker processes did not start: {self._failed or 'timed out'}")
        return self

    def submit(self, payload: Any, runs: int) -> None:
        """Queue one item (returns at once); inside `spreading()` it is held and sent at the end."""
        if self._spread is not None:
            self._spread.append((payload, runs))
        else:
            self._tasks.put((payload, runs, False))

    @contextlib.contextmanager
    def spreading(self) -> Iterator[None]:
        """Items submitted inside go out on leaving, in rounds of one per process: each child takes one
        item a round and waits at a barrier for the others, so every process gets its share (a warm-up
        reaches them all). A short last round is filled with empty items."""
        self._spread = []
        try:
            yield
        finally:
            held, self._spread = self._spread, None
            held += [(None, 0)] * (-len(held) % self.processes)
            for payload, runs in held:
                self._tasks.put((payload, runs, True))

    def reset(self) -> None:
        with self._lock:
            self.runs_done = 0
            self.done_by_pid.clear()
            self.errors = []

    def _read(self) -> None:
        while (message := self._results.get()) is not None:
            kind, pid = message[0], message[1]
            with self._lock:
                if kind == "done":
                    self.runs_done += message[2]
                    self.done_by_pid[pid] += message[2]
                    if message[3] is not None:
                        self.errors.append(message[3])
                elif kind == "ready":
                    self._ready.add(pid)
                elif kind == "failed":
                    self._failed.append(message[2])
                elif kind == "closed":
                    self._closed.add(pid)
                    _merge_logs(*message[2:5])
                    steps.collect_child(message[5])
                self._lock.notify_all()

    def close(self) -> None:
        """Sentinels, wait for every child to finish its items and report, join; terminate stragglers."""
        started = [c for c in self._children if c.pid is not None]
        for _ in started:
            self._tasks.put(None)
        with self._lock:
            self._lock.wait_for(lambda: len(self._closed) + len(self._failed) >= len(started), CLOSE_TIMEOUT_SECONDS)
        for child in started:
            child.join(JOIN_TIMEOUT_SECONDS)
            if child.is_alive():
                log.warning("worker process did not stop: terminated")
                child.terminate()
                child.join(JOIN_TIMEOUT_SECONDS)
        self._results.put(None)
        if self._reader.is_alive():
            self._reader.join(JOIN_TIMEOUT_SECONDS)
        for queue in (self._tasks, self._results):
            queue.close()
            queue.cancel_join_thread()  # a terminated child may have left items nobody will read


def _merge_logs(counts: dict[tuple[str, str], int], examples: list[str], stdout_lines: int) -> None:
    """A child's warnings into the parent's tally, its stdout lines into the parent's sink (if any)."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, LogTally):
            handler.merge(counts, examples)
    if isinstance(sys.stdout, LineSink):
        sys.stdout.lines += stdout_lines


# ---------------------------------------------------------------- Tickwork's executor Lambda


class _ExecutorLambda:
    """One execution environment of the executor function: Services built once, an event per item."""

    def __init__(self, arg: tuple[Settings, int]) -> None:
        from tickwork.wiring import build_services
        from tickwork_local.sending import GatedSender

        settings, db_pool_size = arg
        self.svc = build_services(settings, db_pool_size=db_pool_size, sender=GatedSender())

    def handle(self, event: dict[str, Any]) -> None:
        from tickwork.models import dispatches_from_event
        from tickwork.runs.executor import handle_event

        try:
            handle_event(self.svc, dispatches_from_event(event))
        except Exception:  # as ThreadPoolInvoker does: Lambda would log it the same way
            log.exception("executor invocation failed")

    def close(self) -> None:
        self.svc.close()


class ProcessExecutors:
    """The executor Lambda on `processes` worker processes; `invoke` is the poller's invoker."""

    def __init__(self, settings: Settings, processes: int, workers: int, db_pool_size: int) -> None:
        self.width = split(workers, processes, MIN_WIDTH)
        self.db_pool_per_process = split(db_pool_size, processes, MIN_DB_POOL)
        self.pool = WorkerProcesses(_ExecutorLambda, (settings, self.db_pool_per_process), processes, self.width,
                                    "executor").start()

    @property
    def runs_done(self) -> int:
        return self.pool.runs_done

    @property
    def processes(self) -> int:
        return self.pool.processes

    def processes_used(self) -> int:
        """How many processes have run something since the last reset."""
        return sum(1 for runs in self.pool.done_by_pid.values() if runs)

    def invoke(self, dispatches: Sequence[Dispatch]) -> None:
        for group in group_dispatches(dispatches, wall_clock_ms()):
            self.pool.submit(executor_event(group), len(group))

    def spreading(self) -> contextlib.AbstractContextManager[None]:
        return self.pool.spreading()

    def reset(self) -> None:
        self.pool.reset()
        if steps.enabled():  # every executor process's step timers from now on (bench/steps.py)
            with self.pool.spreading():
                for _ in range(self.processes):
                    self.pool.submit(steps.RESET, 0)

    def close(self) -> None:
        self.pool.close()

