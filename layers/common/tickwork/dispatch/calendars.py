"""The calendars the poller applies to due jobs (a job's index spec names them: `c`), read from Postgres
only when not known or last read over REFRESH_SECONDS ago: at most one statement per batch that has such
jobs, and none in the steady state between refreshes. A calendar changed through the API counts here
within REFRESH_SECONDS (its jobs' next runs are re-aimed at once, tickwork.tenant.calendars)."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Iterable

from aws_lambda_powertools import Logger

from tickwork.calendars.rules import Calendar
from tickwork.dueindex.entries import DueEntry
from tickwork.store import calendars as calendars_store

logger = Logger(child=True)

# Well inside the minute a calendar change must take effect in.
REFRESH_SECONDS = 20.0
Key = tuple[str, str]  # (tenant id, calendar name)


@dataclass
class _Known:
    calendar: Calendar | None  # None: no such calendar (deleted): nothing excluded by it
    updated_at: datetime | None
    read_at: float


class CalendarCache:
    """Per execution environment; shared by the shards' threads of a tick."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, refresh_seconds: float = REFRESH_SECONDS) -> None:
        self.clock = clock
        self.refresh_seconds = refresh_seconds
        self._known: dict[Key, _Known] = {}
        self._lock = threading.Lock()

    def resolve(self, db: Any, entries: Iterable[DueEntry]) -> dict[Key, Calendar]:
        """The calendars these entries' jobs name, reading from `db` (a pool) those not fresh."""
        wanted = {key for entry in entries for key in keys_of(entry.spec)}
        if not wanted:
            return {}
        now = self.clock()
        with self._lock:
            stale = [key for key in wanted if key not in self._known
                     or now - self._known[key].read_at >= self.refresh_seconds]
        if stale:
            with db.connection() as conn:
                rows = calendars_store.compiled(conn, stale)
            self._remember(stale, rows, now)
        with self._lock:
            return {key: known.calendar for key in wanted
                    if (known := self._known.get(key)) is not None and known.calendar is not None}

    def _remember(self, keys: list[Key], rows: dict[Key, tuple[dict[str, Any], datetime]], now: float) -> None:
        with self._lock:
            for key in keys:
                compiled, updated_at = rows.get(key, (None, None))
                known = self._known.get(key)
                if known is not None and known.updated_at == updated_at and updated_at is not None:
                    known.read_at = now  # unchanged: keep its expanded years
                    continue
                calendar = None if compiled is None else calendars_store.calendar_of(key[0], key[1], compiled)
                if compiled is None:
                    logger.warning("a job names a calendar that no longer exists; nothing is excluded by it",
                                   extra={"tenant_id": key[0], "calendar": key[1]})
                self._known[key] = _Known(calendar, updated_at, now)


def keys_of(spec: dict[str, Any] | None) -> list[Key]:
    """The (tenant, name) of each calendar an index spec names."""
    if not spec or not spec.get("c") or not spec.get("t"):
        return []
    return [(spec["t"], name) for name in spec["c"].get("exclude") or ()]


# One per execution environment: the poller Lambda's, or the local runtime's.
shared = CalendarCache()
