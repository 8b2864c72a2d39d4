"""The local runtime's Senders: many executor invocations share one process, and its GIL.

In Lambda a process runs one invocation at a time and sends with tickwork.runs.sending.BoundedSender, whose
threads belong to one group. Here many groups are under way in one process at once.

- GatedSender (the benchmark's executor processes): BoundedSender whose groups hold back reading
  responses while any group of the process is writing its instant's requests, so that those writes,
  one socket send each, are not queued behind the parsing.
- SharedSender (`make dev`, where the poller, the API and every executor share one process): gated the
  same way, and besides
  - its groups get their runs ready and read their responses on one pool of threads for the process,
    instead of a pool started for every group (about a thread started and joined per run); a run blocked
    on its target gets a thread added beside it (tickwork.runs.pool), so such runs cannot use the pool up;
  - no thread blocks waiting for a response: one reader thread watches the socket of every request sent
    and hands the response to the pool once its first bytes are there, or once the attempt's deadline
    has passed (reading it then fails the attempt as a blocking read would have);
  - the garbage collector is off while groups write (Writers).
  At 1,000 runs a second this is the difference between keeping up and falling behind for good
  (docs/benchmarks.md, bottleneck 12); with 500 a second per process, as in the benchmark's executor
  processes, it measured slower than GatedSender, so those keep GatedSender.
"""
from __future__ import annotations

import contextlib
import gc
import selectors
import socket
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Iterator

from tickwork.interfaces import Group, Results, RunSteps
from tickwork.runs.pool import ElasticPool
from tickwork.runs.sending import MAX_PARALLEL_SENDS, BoundedSender, Sending, Slot
from tickwork_local.executors import MAX_WORKERS

# The longest a response is left unread because other groups of the process are still writing.
MAX_READ_DEFER_SECONDS = 0.05
# SharedSender's threads for the whole process, getting runs ready and reading responses. Getting ready
# may open a connection, so a remote target's round trip holds one; a run blocked on its target for
# longer gets a thread added beside it (ElasticPool).
SHARED_THREADS = 16
# The most threads that pool adds for runs blocked on their targets: as many as the process has executor
# environments (tickwork_local.executors.MAX_WORKERS), as each such run in Lambda holds a thread of its own
# invocation's. Fewer (ElasticPool's MOST_THREADS, 256) let one tenant's runs on a target that never completes
# a connection, up to its max_runs_in_flight (500 by default) at once, take every thread and hold back every
# other tenant's runs until their 30 s deadlines (docs/benchmarks.md, noisy neighbour: blackhole).
SHARED_MOST_THREADS = MAX_WORKERS


class Writers:
    """Groups of this process writing their instant's requests right now. With `pause_gc`, the garbage
    collector is off while any of them writes: a collection (tens of milliseconds in a process holding
    the poller, the API and every executor) would otherwise hold the GIL in the middle of an instant.
    What the writes leave behind is collected once they are done."""

    def __init__(self, pause_gc: bool = False) -> None:
        self._changed = threading.Condition()
        self._count = 0
        self._pause_gc = pause_gc
        self._paused = False  # the collector was on, and is off while groups write

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        with self._changed:
            self._count += 1
            if self._count == 1 and self._pause_gc and gc.isenabled():
                gc.disable()
                self._paused = True
        try:
            yield
        finally:
            with self._changed:
                self._count -= 1
                if not self._count:
                    if self._paused:
                        gc.enable()
                        self._paused = False
                    self._changed.notify_all()

    def wait_until_none(self, timeout: float) -> None:
        with self._changed:
            self._changed.wait_for(lambda: not self._count, timeout)


class GatedSender(BoundedSender):
    """BoundedSender whose groups hold back reading responses while any of them writes (up to
    MAX_READ_DEFER_SECONDS). Build one per process: its Writers are what the groups share."""

    def __init__(self, width: int = MAX_PARALLEL_SENDS, pause_gc: bool = False) -> None:
        super().__init__(width)
        self.writers = Writers(pause_gc)

    def writing(self) -> contextlib.AbstractContextManager[None]:
        return self.writers.held()

    def before_reading(self) -> None:
        self.writers.wait_until_none(MAX_READ_DEFER_SECONDS)


class Reader:
    """One thread waiting for the responses of every request a process sent.

    `watch(sock, deadline, ready)` calls `ready()` once, on the reader's thread, when `sock` is readable
    or `deadline` (time.monotonic(), as attempts' deadlines are) has passed, whichever comes first; `ready`
    must not block. Before handing anything over, the reader calls `hold()` (which may wait a little)."""

    def __init__(self, hold: Callable[[], None] = lambda: None) -> None:
        self._hold = hold
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        for end in (self._wake_r, self._wake_w):
            end.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._lock = threading.Lock()
        self._new: list[tuple[socket.socket, float, Callable[[], None]]] = []  # watch()ed, not yet registered
        self._woken = False
        self._closed = False
        self._watched: dict[int, tuple[float, Callable[[], None]]] = {}  # the reader thread's own
        self._thread = threading.Thread(target=self._loop, name="reader", daemon=True)
        self._thread.start()

    def watch(self, sock: socket.socket, deadline: float, ready: Callable[[], None]) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("Reader closed")
            self._new.append((sock, deadline, ready))
            wake, self._woken = not self._woken, True
        if wake:
            self._wake()

    def close(self) -> None:
        """Stop the thread; what is still watched is dropped (its callers are gone too)."""
        with self._lock:
            self._closed = True
        self._wake()
        self._thread.join()
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()

    def _wake(self) -> None:
        with contextlib.suppress(BlockingIOError):  # the pair's buffer is full: the reader is woken anyway
            self._wake_w.send(b"\0")

    def _loop(self) -> None:
        while True:
            deadlines = [deadline for deadline, _ in self._watched.values()]
            timeout = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
            events = self._selector.select(timeout)
            self._hold()  # what became readable while groups write is read once they are done
            ready: list[Callable[[], None]] = []
            for key, _ in events:
                if key.fileobj is self._wake_r:
                    if self._register_new(ready):
                        return
                else:
                    self._selector.unregister(key.fd)
                    ready.append(self._watched.pop(key.fd)[1])
            now = time.monotonic()
            for fd, (deadline, callback) in list(self._watched.items()):
                if deadline <= now:
                    self._selector.unregister(fd)
                    del self._watched[fd]
                    ready.append(callback)
            for callback in ready:
                callback()

    def _register_new(self, ready: list[Callable[[], None]]) -> bool:
        """Register what watch() queued (a socket that cannot be watched is ready at once: reading it
        reports why); True once closed."""
        with contextlib.suppress(BlockingIOError):
            while self._wake_r.recv(4096):
                pass
        with self._lock:
            new, self._new, self._woken, closed = self._new, [], False, self._closed
        for sock, deadline, callback in new:
            try:
                self._selector.register(sock, selectors.EVENT_READ)
            except (ValueError, KeyError, OSError):  # closed (fileno -1) or already watched
                ready.append(callback)
                continue
            self._watched[sock.fileno()] = (deadline, callback)
        return closed


class SharedSender(GatedSender):
    """GatedSender whose groups share one pool of threads and one Reader for the process (started on
    first use). Build one per process."""

    def __init__(self, width: int = MAX_PARALLEL_SENDS, threads: int = SHARED_THREADS,
                 most_threads: int = SHARED_MOST_THREADS) -> None:
        super().__init__(width, pause_gc=True)
        self.threads, self.most_threads = threads, most_threads
        self._lock = threading.Lock()
        self._pool: ElasticPool | None = None
        self._reader: Reader | None = None

    def send(self, steps: RunSteps, group: Group, results: Results) -> None:
        _SharedSending(self, steps, group, results).run()

    def shared(self) -> tuple[ElasticPool, Reader]:
        with self._lock:
            if self._pool is None or self._reader is None:
                self._pool = ElasticPool(self.threads, most=self.most_threads, name="send")
                self._reader = Reader(hold=self.before_reading)
            return self._pool, self._reader

    def close(self) -> None:
        with self._lock:
            pool, reader, self._pool, self._reader = self._pool, self._reader, None, None
        if reader is not None:
            reader.close()
        if pool is not None:
            pool.shutdown(wait=False)  # a run still reading is left to the sweeper, as the runtime's stop says


class _SharedSending(Sending):
    """A group sent on its SharedSender's threads. Its runs judged at their instant (each waits for it,
    and for its response, on a thread) get threads of the group's own, so they never hold shared ones."""

    sender: SharedSender
    reader: Reader

    def run(self) -> None:
        pool, self.reader = self.sender.shared()
        # Its threads start only as runs are submitted: none for a group without runs judged at the instant.
        with ThreadPoolExecutor(max_workers=max(1, min(self.sender.width, len(self.group.at_instant))),
                                thread_name_prefix="guarded") as guarded:
            self.run_on(pool, guarded)

    def _read_later(self, slot: Slot) -> Future[Any]:
        assert slot.prepared is not None and self.pool is not None
        sock, deadline = slot.prepared.awaiting()
        if sock is None:  # nothing to wait for: reading reports what happened
            return super()._read_later(slot)
        done: Future[Any] = Future()
        pool = self.pool

        def read() -> None:
            try:
                done.set_result(self._complete(slot))
            except BaseException as exc:  # handed to the group, which re-raises it
                done.set_exception(exc)

        self.reader.watch(sock, deadline, lambda: pool.submit(read))
        return done
