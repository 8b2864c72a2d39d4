"""ElasticPool: threads for runs, which targets that block cannot use up.

Getting a run ready opens a connection when no warm one is there, and reading an answer takes as long
as the target takes to send it. Most targets make both short, but one that never completes a connection
(its packets dropped) or answers a byte at a time holds a thread until the attempt's deadline (30 s by
default). With a fixed number of threads, enough such runs at once would hold back every other run
sharing them: the rest of a Lambda invocation's group (up to 250 runs on 50 threads), of any tenant, or
every run of the local runtime's process.

So the pool works like concurrent.futures.ThreadPoolExecutor (a thread is started on submit while none
is idle, up to `core`), and besides, while tasks wait and fewer than `core` of its threads are free of
tasks running `stuck_after` seconds or more, it adds as many threads as there are such stuck tasks (a
queue of them is got past in a few rounds), up to `most`. An added thread leaves once nothing waits and
the pool has more threads than `core` plus the tasks still stuck, or once idle for `idle_exit` seconds.
Tasks that end quickly keep to the `core` threads: in a process running many groups, more threads
running Python at once only queue for the one GIL (docs/benchmarks.md, bottleneck 12). One watchdog
thread per process checks every pool.
"""
from __future__ import annotations

import itertools
import queue
import threading
import time
import weakref
from concurrent.futures import Executor, Future
from typing import Any, Callable

# A task running this long is waiting on a target, not on the CPU: threads are added beside it. Runs
# are readied over a second ahead of their instant, so this delay costs the runs queued behind it nothing.
STUCK_AFTER_SECONDS = 0.5
# The most threads a pool has unless told: beyond that, runs blocked on targets wait for each other's deadline.
MOST_THREADS = 256
# How long a thread added for a blocked task stays with nothing to do.
IDLE_EXIT_SECONDS = 10.0

# One lock around every pool's submit in the process, as ThreadPoolExecutor takes its module's
# _global_shutdown_lock: groups submitting at once, each starting threads, took twice as long without it
# (8 groups of 50 tasks in one process: 15-20 ms to submit against 9-10 ms).
_SUBMITTING = threading.Lock()
_Task = tuple[Future, Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class ElasticPool(Executor):
    """Up to `core` threads, started as tasks come, plus threads added for tasks stuck `stuck_after`
    seconds or more while others wait, up to `most` (checked every `stuck_after` / 2 seconds)."""

    def __init__(self, core: int, most: int = MOST_THREADS, stuck_after: float = STUCK_AFTER_SECONDS,
                 idle_exit: float = IDLE_EXIT_SECONDS, name: str = "pool") -> None:
        self.core, self.most, self.name = core, max(core, most), name
        self.stuck_after, self.idle_exit = stuck_after, idle_exit
        self._numbers = itertools.count()
        self._tasks: queue.SimpleQueue[_Task | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)  # threads waiting for a task, as ThreadPoolExecutor counts them
        self._began: dict[int, float] = {}  # a busy thread's ident -> when its task began
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._closed = False
        _WATCHDOG.add(self)

    @property
    def threads(self) -> int:
        with self._lock:
            return len(self._threads)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock, _SUBMITTING:
            if self._closed:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self._tasks.put((future, fn, args, kwargs))
            if not self._idle.acquire(blocking=False) and len(self._threads) < self.core:
                self._add_thread(extra=False)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Tasks already submitted still run (unless `cancel_futures`); then every thread leaves."""
        with self._lock:
            self._closed = True
        _WATCHDOG.discard(self)
        if cancel_futures:
            while True:
                try:
                    task = self._tasks.get_nowait()
                except queue.Empty:
                    break
                if task is not None:
                    task[0].cancel()
        self._tasks.put(None)  # each thread that takes it puts it back for the next one, and leaves
        if wait:
            with self._lock:
                threads = list(self._threads)
            for thread in threads:
                thread.join()

    def check(self) -> None:
        """Add threads if tasks wait behind stuck ones (the watchdog calls this)."""
        waiting = self._tasks.qsize()
        if not waiting or self._closed:
            return
        stuck = self._stuck()
        with self._lock:
            threads = len(self._threads)
            if threads - stuck < self.core:  # fewer than `core` threads left for the work waiting
                for _ in range(min(waiting, self.most - threads, stuck)):
                    self._add_thread(extra=True)

    def _add_thread(self, extra: bool) -> None:
        # The thread holds the pool only weakly, as ThreadPoolExecutor's do: no reference cycle keeps a
        # finished group's pool, its threads and its futures for the garbage collector to find.
        ref = weakref.ref(self, lambda _, tasks=self._tasks: tasks.put(None))  # type: ignore[misc]
        thread = threading.Thread(target=_work, args=(ref, self._tasks, self._began, extra, self.idle_exit),
                                  name=f"{self.name}-{next(self._numbers)}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _leave(self, thread: threading.Thread) -> None:
        with self._lock:
            self._threads.remove(thread)

    def _stuck(self) -> int:
        now = time.monotonic()
        return sum(1 for began in list(self._began.values()) if now - began >= self.stuck_after)

    def _surplus(self) -> bool:
        """Nothing waits, and there are more threads than the core and the tasks still stuck need."""
        if not self._tasks.empty():
            return False
        stuck = self._stuck()
        with self._lock:
            return len(self._threads) > self.core + stuck


def _work(ref: weakref.ref[ElasticPool], tasks: queue.SimpleQueue[_Task | None], began: dict[int, float],
          extra: bool, idle_exit: float) -> None:
    """A pool's thread: run tasks until the pool shuts down (or, added for stuck ones, is not needed)."""
    me = threading.get_ident()
    while True:
        try:
            task = tasks.get(timeout=idle_exit if extra else None)
        except queue.Empty:
            break
        if task is None:
            tasks.put(None)
            break
        future, fn, args, kwargs = task
        if future.set_running_or_notify_cancel():
            began[me] = time.monotonic()
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:  # handed to whoever waits on the future
                future.set_exception(exc)
            finally:
                del began[me]
        del task, future, fn, args, kwargs  # nothing of a task outlives it while the thread waits
        pool = ref()
        if pool is None or (extra and pool._surplus()):
            break
        pool._idle.release()
        del pool
    pool = ref()
    if pool is not None:
        pool._leave(threading.current_thread())


class _Watchdog:
    """The one thread of the process that checks every open pool, while there is one."""

    def __init__(self) -> None:
        self._pools: weakref.WeakSet[ElasticPool] = weakref.WeakSet()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def add(self, pool: ElasticPool) -> None:
        with self._changed:
            self._pools.add(pool)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="pool-watchdog", daemon=True)
                self._thread.start()
            self._changed.notify()

    def discard(self, pool: ElasticPool) -> None:
        with self._changed:
            self._pools.discard(pool)

    def _loop(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: len(self._pools) > 0)
            time.sleep(self._check_all())

    def _check_all(self) -> float:
        """Check every open pool; the seconds until the next check."""
        with self._changed:
            pools = list(self._pools)
        for pool in pools:
            pool.check()
        return min((pool.stuck_after for pool in pools), default=STUCK_AFTER_SECONDS) / 2


_WATCHDOG = _Watchdog()
