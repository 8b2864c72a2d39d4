"""Migrated schemas for the tests, made ahead of the tests that take them and dropped after, off their clock.

Migrating a new schema from scratch and dropping it takes 0.3-0.7 s, nearly all of it the database's waiting
(its backend's CPU is ~0.1 s of that), and about 1,100 tests take one. One thread per test process makes the
next few while the tests run, and drops the used ones: a test still gets a schema of its own, migrated from
scratch, that no other test saw, without waiting for it.
"""
from __future__ import annotations

import queue
import threading
import uuid
from dataclasses import dataclass
from typing import Callable

# How many migrated schemas wait for a test: the next one ready, and the one after being made meanwhile.
AHEAD = 2
# A test waits this long for its schema: far more than a migration takes on a loaded machine.
TAKE_TIMEOUT_SECONDS = 120.0


@dataclass(frozen=True)
class Made:
    """A migrated schema, or why it could not be made (raised in the test that takes it)."""

    schema: str = ""
    error: BaseException | None = None


def schema_name() -> str:
    return f"t_{uuid.uuid4().hex[:12]}"


class MigratedSchemas:
    """Hands out migrated schemas (`take`) and drops those given back (`give_back`), by one thread of its
    own that drops first and, when it has nothing to drop, makes up to `ahead` schemas ahead."""

    def __init__(self, make: Callable[[str], None], drop: Callable[[str], None], ahead: int = AHEAD) -> None:
        self._make, self._drop, self._ahead = make, drop, ahead
        self._ready: queue.Queue[Made] = queue.Queue()
        self._used: list[str] = []
        self._drop_errors: list[BaseException] = []
        self._wake = threading.Condition()
        self._closing = False
        self._thread = threading.Thread(target=self._work, name="migrated-schemas", daemon=True)
        self._thread.start()

    def take(self) -> str:
        try:
            made = self._ready.get(timeout=TAKE_TIMEOUT_SECONDS)
        except queue.Empty:
            raise TimeoutError(f"no migrated schema within {TAKE_TIMEOUT_SECONDS:.0f} s") from None
        with self._wake:
            self._wake.notify()  # one fewer ready: make the next
        if made.error is not None:
            raise made.error
        return made.schema

    def give_back(self, schema: str) -> None:
        with self._wake:
            self._used.append(schema)
            self._wake.notify()

    def close(self) -> None:
        """Drops what was given back and what was made but never taken; raises what a drop raised."""
        with self._wake:
            self._closing = True
            self._wake.notify()
        self._thread.join()
        while not self._ready.empty():
            made = self._ready.get()
            if made.schema:
                self._drop(made.schema)
        if self._drop_errors:
            raise self._drop_errors[0]

    def _next_step(self) -> tuple[str, str] | None:
        with self._wake:
            while True:
                if self._used:
                    return "drop", self._used.pop()
                if self._closing:
                    return None
                if self._ready.qsize() < self._ahead:
                    return "make", schema_name()
                self._wake.wait()

    def _work(self) -> None:
        while (step := self._next_step()) is not None:
            action, schema = step
            try:
                if action == "drop":
                    self._drop(schema)
                    continue
                self._make(schema)
                self._ready.put(Made(schema))
            except Exception as error:  # a make's fails the test that takes it; a drop's, the session's end
                if action == "drop":
                    self._drop_errors.append(error)
                else:
                    self._ready.put(Made(error=error))
