"""What tests at every level share: the one fake clock and the one polling helper."""
from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta
from typing import Any, Callable, Mapping

from tickwork.dueindex.entries import DueEntry
from tickwork.dueindex.index import DueIndex
from tickwork.http.delivery import Connections, prepare
from tickwork.outcome import Outcome


class FakeClock:
    """Reads `at` and moves only when slept on: an executor on it sends at its runs' exact instants, at
    whatever date the test chose, however slow the machine."""

    def __init__(self, at: datetime) -> None:
        self.at = at
        self.slept: list[float] = []
        self._lock = threading.Lock()

    def time(self) -> float:
        with self._lock:
            return self.at.timestamp()

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.slept.append(seconds)
            self.at += timedelta(seconds=seconds)


def wait_for(condition: Callable[[], bool], timeout: float = 10.0, interval: float = 0.01) -> bool:
    """Poll until `condition()` holds (True) or `timeout` seconds pass (False): for work in other threads.

    A condition that calls the API must poll slower than its rate limit (see API_POLL_INTERVAL)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True


# The due index as tests look at it and set it up: what production never asks of it.

def score_of(index: DueIndex, member: str) -> int | None:
    """The member's score in its shard's sorted set, None when it is not there."""
    shard = index.shard_of_member(member)
    raw = shard.redis.zscore(shard.due_key, member)
    return None if raw is None else int(raw)


def mark_built(index: DueIndex, built_at_ms: int) -> None:
    """Every shard's marker set, as a finished rebuild sets it: the index counts as whole."""
    for shard in index.shards:
        shard.redis.set(shard.marker_key, built_at_ms)


def fetch_due(index: DueIndex, max_score: int, limit: int) -> tuple[bool, list[DueEntry]]:
    """Whether every shard is intact, and up to `limit` entries due by `max_score` across them, earliest first."""
    intact, entries = True, []
    for shard in index.shards:
        whole, found, _ = shard.fetch_due_counting(max_score, limit, 0, 0)
        intact, entries = intact and whole, entries + found
    return intact, sorted(entries, key=lambda e: e.score)[:limit]


def hold_tick_lock(index: DueIndex, token: str, ttl_ms: int) -> bool:
    """Take the tick lock as a poller ticking elsewhere holds it."""
    return bool(index.redis.set(index.tick_lock_key, token, nx=True, px=ttl_ms))


def send(connections: Connections, request: Mapping[str, Any], extra_headers: Mapping[str, str], timeout: float,
         pinned_address: str | None = None) -> Outcome:
    """One attempt now, as the executor takes it in three steps: prepare, fire and complete."""
    prepared = prepare(connections, request, extra_headers, timeout, pinned_address)
    prepared.fire()
    return prepared.complete()
