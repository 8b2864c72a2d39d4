"""Lambda's side of an asynchronous invoke, for the chaotic invoker: its event queue, and the execution
environments that run the events."""
from __future__ import annotations

import collections
import heapq
import itertools
import threading
from typing import Callable, Generic, TypeVar

T = TypeVar("T")


class EventQueue(Generic[T]):
    """Lambda's queue of asynchronous events: one thread hands each item on when its time comes (on `clock`)."""

    def __init__(self, hand_on: Callable[[T], None], clock: Callable[[], float]) -> None:
        self._hand_on = hand_on
        self._clock = clock
        self._heap: list[tuple[float, int, T]] = []
        self._order = itertools.count()  # equal times keep the order they were put in
        self._changed = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="lambda-queue", daemon=True)
        self._thread.start()

    def put(self, at: float, item: T) -> None:
        with self._changed:
            heapq.heappush(self._heap, (at, next(self._order), item))
            self._changed.notify()

    def __len__(self) -> int:
        with self._changed:
            return len(self._heap)

    def close(self) -> None:
        """Stop; what was not handed on yet is dropped."""
        with self._changed:
            self._closed = True
            self._heap.clear()
            self._changed.notify()
        self._thread.join()

    def _loop(self) -> None:
        while (item := self._next()) is not None:
            self._hand_on(item)

    def _next(self) -> T | None:
        with self._changed:
            while not self._closed:
                wait = self._heap[0][0] - self._clock() if self._heap else None
                if wait is not None and wait <= 0:
                    return heapq.heappop(self._heap)[2]
                self._changed.wait(wait)
            return None


class Environments(Generic[T]):
    """Execution environments: threads running one invocation at a time, at most `size` at once.

    `run` returns False when its invocation was killed: that environment ends, and the keep-alive connections
    it kept (tickwork.runs.executor.http_client keeps them per thread) go with it; a new one starts when work
    waits, as Lambda starts a fresh environment after a timeout."""

    def __init__(self, run: Callable[[T], bool], size: int) -> None:
        self._run = run
        self._size = size
        self._waiting: collections.deque[T] = collections.deque()
        self._changed = threading.Condition()
        self._alive = self._idle = self._busy = 0
        self._closed = False
        self._names = itertools.count(1)

    def submit(self, item: T) -> None:
        with self._changed:
            if self._closed:
                return
            self._waiting.append(item)
            self._grow()
            self._changed.notify()

    def pending(self) -> int:
        """Invocations waiting for an environment or running."""
        with self._changed:
            return len(self._waiting) + self._busy

    def close(self, grace_seconds: float) -> bool:
        """Drop what waits, wait up to `grace_seconds` for invocations under way; True when none is left."""
        with self._changed:
            self._closed = True
            self._waiting.clear()
            self._changed.notify_all()
            return self._changed.wait_for(lambda: not self._busy, grace_seconds)

    def _grow(self) -> None:
        if len(self._waiting) > self._idle and self._alive < self._size:
            self._alive += 1
            threading.Thread(target=self._serve, name=f"executor-{next(self._names)}", daemon=True).start()

    def _serve(self) -> None:
        alive = True
        while alive and (item := self._take()) is not None:
            alive = self._run(item)
            with self._changed:
                self._busy -= 1
                if not alive:
                    self._alive -= 1
                    if not self._closed:
                        self._grow()
                self._changed.notify_all()

    def _take(self) -> T | None:
        with self._changed:
            self._idle += 1
            self._changed.wait_for(lambda: self._waiting or self._closed)
            self._idle -= 1
            if self._closed:
                self._alive -= 1
                return None
            self._busy += 1
            return self._waiting.popleft()
