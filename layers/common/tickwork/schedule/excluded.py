"""A job's schedule with its calendars applied (`calendar.exclude`, `calendar.on_excluded`). Pure: instants
in, instants out, like the schedule it wraps.

A slot is excluded when its date, on the job's time zone's wall clock, is excluded by one of the
calendars (tickwork.calendars.rules). Then:

- `skip`: the slot stays where it is, and is recorded `skipped` naming the calendar (`excluded_by`).
- `next_day`: the slot moves to the same wall-clock time on the next date that no calendar excludes,
  resolved by the engine's DST rules for one-off wall times (a time in a gap runs when the gap ends, a
  repeated one the first time). A moved slot at the instant of a regular one is that one run, not two.
  A slot with no such date within MOVE_DAYS stays where it is and is recorded skipped, as with `skip`.

The result is again a fixed set of instants (`next_after_ms(t)` is the smallest one after t), so the
catch-up policy (tickwork.rules.policy) works on it unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import lru_cache
from typing import Any, Sequence
from zoneinfo import ZoneInfo

from tickwork import defaults
from tickwork.calendars.rules import Calendar, excluded_by
from tickwork.schedule.engine import Schedule, floor_ms, resolve_wall, zone
from tickwork.timeutil import from_ms
from tickwork.vocab import OnExcluded

DEFAULT_ON_EXCLUDED = defaults.ON_EXCLUDED
# How far a `next_day` slot may move: past a year of excluded dates, the calendar is the schedule's end.
MOVE_DAYS = 366
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_DAY = 86400
# Wall clocks, dates and resolved wall times remembered per zone, and next_day answers per instance: a tick
# plans thousands of jobs due at the same few instants, and a zone lookup (a datetime through zoneinfo) was
# most of a calendar job's plan. Exact: each is a pure function of what it is remembered by.
_MEMO_SIZE = 4096


@dataclass(frozen=True)
class SlotDetail:
    """One slot of a previewed schedule: when, and what its calendars did to it."""

    at: datetime
    excluded_by: str | None = None  # recorded skipped: this calendar excludes its date
    moved_from: datetime | None = None  # moved here (next_day) from this slot on an excluded date


class ExcludingSchedule:
    """`base` with `calendars` applied as `on_excluded` says; quacks like a Schedule where runs are asked."""

    def __init__(self, base: Schedule, calendars: Sequence[Calendar], on_excluded: str) -> None:
        self.base = base
        self.calendars = tuple(calendars)
        self.on_excluded = on_excluded
        self.tz = zone(base.timezone)
        self.expression, self.canonical, self.timezone = base.expression, base.canonical, base.timezone
        # next_day answers found so far: the jobs of a poller's batch sharing a spec share this instance, and
        # ask it about the same instants.
        self._nexts: dict[int, int | None] = {}

    def describe(self) -> str:
        return self.base.describe()

    def spec(self) -> dict[str, Any]:
        return self.base.spec()

    # ------------------------------------------------------------ the set of slots

    def next_after_ms(self, after_ms: int) -> int | None:
        if self.on_excluded != OnExcluded.NEXT_DAY or not self.calendars:
            return self.base.next_after_ms(after_ms)
        if after_ms not in self._nexts:
            if len(self._nexts) >= _MEMO_SIZE:
                self._nexts.clear()
            self._nexts[after_ms] = self._next_moved(after_ms)
        return self._nexts[after_ms]

    def period_ms(self, from_ms: int, to_ms: int) -> int | None:
        return self.base.period_ms(from_ms, to_ms) if self.on_excluded != OnExcluded.NEXT_DAY else None

    def next_after(self, after: datetime) -> datetime | None:
        found = self.next_after_ms(floor_ms(after))
        return None if found is None else from_ms(found)

    def preview(self, after: datetime, count: int) -> list[datetime]:
        return [detail.at for detail in self.slots(after, count)]

    def excluded_by(self, slot_ms: int) -> str | None:
        """The calendar whose exclusion makes this slot a `skipped` record instead of a run (None: it runs)."""
        day = self.local_date(slot_ms)
        name = excluded_by(self.calendars, day)
        if name is None or (self.on_excluded == OnExcluded.NEXT_DAY and self._landing(day, {}) is not None):
            return None
        return name

    def slots(self, after: datetime, count: int) -> list[SlotDetail]:
        """The next `count` slots after `after`, each with what its calendars did to it."""
        details: list[SlotDetail] = []
        cursor = floor_ms(after)
        while len(details) < count and (found := self.next_after_ms(cursor)) is not None:
            details.append(SlotDetail(from_ms(found), self.excluded_by(found), self._moved_from(found)))
            cursor = found
        return details

    def runs(self, after: datetime, count: int) -> list[datetime]:
        """The next `count` slots after `after` that run (skipped ones left out), looking at most MOVE_DAYS
        dates of skipped slots ahead."""
        found: list[datetime] = []
        cursor, horizon = floor_ms(after), floor_ms(after) + 2 * MOVE_DAYS * _DAY * 1000
        while len(found) < count and (slot := self.next_after_ms(cursor)) is not None and slot < horizon:
            if self.excluded_by(slot) is None:
                found.append(from_ms(slot))
                cursor = slot
            else:
                cursor = max(slot, self._day_end_ms(self.local_date(slot)) - 1)  # the rest of its date is skipped too
        return found

    # ------------------------------------------------------------ next_day

    def _next_moved(self, after_ms: int) -> int | None:
        """The smallest moved-or-kept slot after `after_ms`: slots of the excluded dates just before (or at)
        after_ms's date may land after it, so the walk starts at the first of those dates."""
        today = self.local_date(after_ms)
        if not excluded_by(self.calendars, today) and not excluded_by(self.calendars, today - timedelta(days=1)):
            # Then the walk below starts at after_ms (_sources_from), and a first slot on a free date is kept
            # and ends it (every later slot is later): the base's next slot is the answer.
            slot = self.base.next_after_ms(after_ms)
            if slot is None or (day := self.local_date(slot)) == today or not excluded_by(self.calendars, day):
                return slot
        landings: dict[date, date | None] = {}
        best: int | None = None
        cursor = self._sources_from(after_ms)
        while (slot := self.base.next_after_ms(cursor)) is not None and (best is None or slot < best):
            day = self.local_date(slot)
            landing = self._landing(day, landings) if excluded_by(self.calendars, day) else day
            if landing is None or landing == day:  # runs where it is (or is recorded skipped there)
                if slot > after_ms:
                    best = slot if best is None else min(best, slot)
                cursor = max(slot, min(after_ms, self._day_end_ms(day) - 1))
                continue
            moved = self._moved(slot, day, landing)
            if moved > after_ms:
                best = moved if best is None else min(best, moved)
                cursor = max(slot, self._day_end_ms(day) - 1)  # later slots of `day` land later
            else:
                cursor = max(slot, self._skip_towards(slot, day, landing, after_ms))
        return best

    def _sources_from(self, after_ms: int) -> int:
        """Where the walk for next_after_ms(after_ms) starts: before the run of excluded dates that ends at
        or just before after_ms's date, if any, else at after_ms."""
        today = self.local_date(after_ms)
        first = today if excluded_by(self.calendars, today) else None
        day = today - timedelta(days=1)
        for _ in range(MOVE_DAYS):
            if not excluded_by(self.calendars, day):
                break
            first, day = day, day - timedelta(days=1)
        return after_ms if first is None else min(after_ms, self._day_start_ms(first) - 1)

    def _landing(self, day: date, memo: dict[date, date | None]) -> date | None:
        """The first date after `day` that no calendar excludes, within MOVE_DAYS; None if there is none."""
        if day not in memo:
            memo[day] = None
            for offset in range(1, MOVE_DAYS + 1):
                candidate = day + timedelta(days=offset)
                if not excluded_by(self.calendars, candidate):
                    memo[day] = candidate
                    break
        return memo[day]

    def _moved(self, slot_ms: int, day: date, landing: date) -> int:
        """`slot_ms`'s wall-clock time of day on `landing`, as an instant (ms kept)."""
        seconds, millis = divmod(slot_ms, 1000)
        time_of_day = self._wall(seconds) - self._wall_midnight(day)
        return _resolved(self.tz, self._wall_midnight(landing) + time_of_day) * 1000 + millis

    def _skip_towards(self, slot_ms: int, day: date, landing: date, after_ms: int) -> int:
        """A cursor on `day` just before the slots that land after `after_ms` (on `landing`, its date): the
        same wall time of day, less the difference of the two dates' UTC offsets, so none is passed."""
        target = self._wall(after_ms // 1000) - self._wall_midnight(landing) + self._wall_midnight(day)
        offset_here = self._wall(slot_ms // 1000) - slot_ms // 1000
        margin = abs(offset_here - (self._wall(after_ms // 1000) - after_ms // 1000)) + 1
        return min((target - offset_here - margin) * 1000, self._day_end_ms(day) - 1)

    def _moved_from(self, slot_ms: int) -> datetime | None:
        """For a preview: the first slot of an excluded date that next_day moved to `slot_ms`, if any."""
        if self.on_excluded != OnExcluded.NEXT_DAY or self.excluded_by(slot_ms) is not None:
            return None
        landing = self.local_date(slot_ms)
        time_of_day = self._wall(slot_ms // 1000) - self._wall_midnight(landing)
        day, sources = landing - timedelta(days=1), list[date]()
        while len(sources) < MOVE_DAYS and excluded_by(self.calendars, day):
            sources.append(day)
            day -= timedelta(days=1)
        for source in reversed(sources):
            candidate = _resolved(self.tz, self._wall_midnight(source) + time_of_day) * 1000 + slot_ms % 1000
            if self.base.next_after_ms(candidate - 1) == candidate and self.local_date(candidate) == source:
                return from_ms(candidate)
        return None

    # ------------------------------------------------------------ wall clock

    def _wall(self, seconds: int) -> int:
        """The job's zone's wall clock at UTC second `seconds`, as seconds since 1970-01-01T00:00 (naive)."""
        return _wall_at(self.tz, seconds)

    def local_date(self, instant_ms: int) -> date:
        """The date of `instant_ms` on the job's zone's wall clock."""
        return _date_at(self.tz, instant_ms // 1000)

    @staticmethod
    def _wall_midnight(day: date) -> int:
        return (day.toordinal() - _EPOCH_ORDINAL) * _DAY

    def _day_start_ms(self, day: date) -> int:
        return _resolved(self.tz, self._wall_midnight(day)) * 1000

    def _day_end_ms(self, day: date) -> int:
        return self._day_start_ms(day + timedelta(days=1))


@lru_cache(maxsize=_MEMO_SIZE)
def _wall_at(tz: ZoneInfo, seconds: int) -> int:
    offset = datetime.fromtimestamp(seconds, tz).utcoffset()
    return seconds + int(offset.total_seconds()) if offset is not None else seconds


@lru_cache(maxsize=_MEMO_SIZE)
def _date_at(tz: ZoneInfo, seconds: int) -> date:
    return date.fromordinal(_EPOCH_ORDINAL + _wall_at(tz, seconds) // _DAY)


_resolved = lru_cache(maxsize=_MEMO_SIZE)(resolve_wall)


def with_calendars(base: Schedule, calendars: Sequence[Calendar], on_excluded: str) -> Schedule | ExcludingSchedule:
    """`base` itself when no calendar applies, else the schedule with them applied."""
    return ExcludingSchedule(base, calendars, on_excluded) if calendars else base
