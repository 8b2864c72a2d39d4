"""The calendars the poller applies to due jobs (a job's index spec names them: `c`), read from Postgres
only when not known or last read over REFRESH_SECONDS ago: at most one statement per batch that has such
jobs, and none in the steady state between refreshes. A calendar changed through the API counts here
within REFRESH_SECONDS (its jobs' next runs are re-aimed at once, tickwork.tenant.calendars), or at the next
read of one that a job failed with (`forget`).

A calendar that cannot be read or compiled is unreadable for the jobs naming it only: they are set aside
(tickwork.dispatch.quarantine), the batch goes on, and it is read again when next asked for."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Iterable, Sequence

from aws_lambda_powertools import Logger

from tickwork.calendars.rules import Calendar
from tickwork.dispatch.quarantine import isolated
from tickwork.dueindex.entries import DueEntry
from tickwork.store import calendars as calendars_store

logger = Logger(child=True)

# Well inside the minute a calendar change must take effect in.
REFRESH_SECONDS = 20.0
Key = tuple[str, str]  # (tenant id, calendar name)
Rows = dict[Key, tuple[dict[str, Any], datetime]]


@dataclass(frozen=True)
class Resolved:
    """The calendars a batch's jobs name, and those that could not be read (with why)."""

    calendars: dict[Key, Calendar] = field(default_factory=dict)
    unreadable: dict[Key, Exception] = field(default_factory=dict)


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

    def resolve(self, db: Any, entries: Sequence[DueEntry]) -> Resolved:
        """The calendars these entries' jobs name, reading from `db` (a pool) those not fresh."""
        wanted = _wanted(entries)
        if not wanted:
            return Resolved()
        now = self.clock()
        with self._lock:
            stale = [key for key in wanted if key not in self._known
                     or now - self._known[key].read_at >= self.refresh_seconds]
        unreadable: dict[Key, Exception] = {}
        if stale:
            with db.connection() as conn:
                read = isolated(stale, lambda keys: calendars_store.compiled(conn, keys))
            unreadable = {key: error for key, error in read.failed}
            rows = {key: row for found in read.results for key, row in found.items()}
            unreadable.update(self._remember([key for key in stale if key not in unreadable], rows, now))
        with self._lock:
            return Resolved({key: known.calendar for key in wanted
                             if (known := self._known.get(key)) is not None and known.calendar is not None},
                            unreadable)

    def forget(self, keys: Iterable[Key]) -> None:
        """Read these again when next asked for (a job naming them failed: one may have changed since)."""
        with self._lock:
            for key in keys:
                self._known.pop(key, None)

    def _remember(self, keys: list[Key], rows: Rows, now: float) -> dict[Key, Exception]:
        """Keep what was read of `keys`; returns those whose stored form does not compile, not kept."""
        unreadable: dict[Key, Exception] = {}
        with self._lock:
            for key in keys:
                compiled, updated_at = rows.get(key, (None, None))
                known = self._known.get(key)
                if known is not None and known.updated_at == updated_at and updated_at is not None:
                    known.read_at = now  # unchanged: keep its expanded years
                    continue
                try:
                    calendar = None if compiled is None else calendars_store.calendar_of(key[0], key[1], compiled)
                except Exception as error:  # noqa: BLE001 - this calendar's jobs are set aside, not the batch
                    unreadable[key] = error
                    self._known.pop(key, None)
                    continue
                if compiled is None:
                    logger.warning("a job names a calendar that no longer exists; nothing is excluded by it",
                                   extra={"tenant_id": key[0], "calendar": key[1]})
                self._known[key] = _Known(calendar, updated_at, now)
        return unreadable


def _wanted(entries: Sequence[DueEntry]) -> set[Key]:
    """The calendars the entries' jobs name; a spec whose `c` is not what the API writes names none (its
    planning raises, and sets that job aside)."""
    try:
        return {key for entry in entries for key in keys_of(entry.spec)}
    except Exception:  # noqa: BLE001 - one spec is broken: the others are read one by one
        wanted: set[Key] = set()
        for entry in entries:
            try:
                wanted.update(keys_of(entry.spec))
            except Exception:  # noqa: BLE001 - the job's planning fails on it too
                continue
        return wanted


def keys_of(spec: dict[str, Any] | None) -> list[Key]:
    """The (tenant, name) of each calendar an index spec names."""
    if not spec or not spec.get("c") or not spec.get("t"):
        return []
    return [(spec["t"], name) for name in spec["c"].get("exclude") or ()]


# One per execution environment: the poller Lambda's, or the local runtime's.
shared = CalendarCache()
