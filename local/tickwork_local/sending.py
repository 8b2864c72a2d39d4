"""The local runtime's Sender: many executor invocations share this process, and its GIL.

Reading a response (parsing it takes the GIL) waits while any group of the process is writing its
instant's requests, so that those writes, one socket send each, are not queued behind the parsing.
In Lambda a process runs one invocation at a time and uses tickwork.sending.BoundedSender.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Iterator

from tickwork.sending import MAX_PARALLEL_SENDS, BoundedSender

# The longest a response is left unread because other groups of the process are still writing.
MAX_READ_DEFER_SECONDS = 0.05


class Writers:
    """Groups of this process writing their instant's requests right now."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._count = 0

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        with self._changed:
            self._count += 1
        try:
            yield
        finally:
            with self._changed:
                self._count -= 1
                if not self._count:
                    self._changed.notify_all()

    def wait_until_none(self, timeout: float) -> None:
        with self._changed:
            self._changed.wait_for(lambda: not self._count, timeout)


class GatedSender(BoundedSender):
    """BoundedSender whose groups hold back reading responses while any of them writes (up to
    MAX_READ_DEFER_SECONDS). Build one per process: its Writers are what the groups share."""

    def __init__(self, width: int = MAX_PARALLEL_SENDS) -> None:
        super().__init__(width)
        self.writers = Writers()

    def writing(self) -> contextlib.AbstractContextManager[None]:
        return self.writers.held()

    def before_reading(self) -> None:
        self.writers.wait_until_none(MAX_READ_DEFER_SECONDS)
