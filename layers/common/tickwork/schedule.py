"""Schedules: parse once, then answer "when is the next run strictly after t?" exactly, in the job's zone.

Pure: every instant comes in as an argument; nothing here reads the clock. DST rules: docs/schedules.md.
"""
from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any, Protocol
from zoneinfo import ZoneInfo

from tickwork.cron import CronExpr, parse_cron
from tickwork.errors import ScheduleError

_EPOCH = datetime(1970, 1, 1)
_SECOND = timedelta(seconds=1)
# Larger than any real cache of due jobs per warm poller, so a tick never re-parses a job it saw before.
SPEC_CACHE_SIZE = 65536


class Rule(Protocol):
    canonical: str

    def next_s(self, after_s: int) -> int | None: ...


@lru_cache(maxsize=512)
def zone(name: str) -> ZoneInfo:
    """The IANA zone `name`, or ScheduleError(field="timezone")."""
    try:
        return ZoneInfo(name)
    except (KeyError, ValueError, OSError, TypeError) as exc:
        raise ScheduleError(f"unknown time zone {name!r}", "timezone") from exc


def _wall_seconds(wall: datetime) -> int:
    return (wall - _EPOCH) // _SECOND


def _offset_s(tz: ZoneInfo, wall: datetime, fold: int) -> int:
    offset = wall.replace(tzinfo=tz, fold=fold).utcoffset()
    assert offset is not None
    return offset // _SECOND


def _offset_at(tz: ZoneInfo, instant_s: int) -> int:
    offset = datetime.fromtimestamp(instant_s, tz).utcoffset()
    assert offset is not None
    return offset // _SECOND


def _transition(tz: ZoneInfo, before_s: int, after_s: int) -> int:
    """First whole second in (before_s, after_s] already on the UTC offset in force at after_s."""
    target = _offset_at(tz, after_s)
    while after_s - before_s > 1:
        mid = (before_s + after_s) // 2
        if _offset_at(tz, mid) == target:
            after_s = mid
        else:
            before_s = mid
    return after_s


class CronRule:
    """Cron in a zone: the set of instants its matching wall times denote under the DST rules."""

    __slots__ = ("canonical", "expr", "tz")

    def __init__(self, expr: CronExpr, tz: ZoneInfo) -> None:
        self.canonical = expr.canonical
        self.expr = expr
        self.tz = tz

    def next_s(self, after_s: int) -> int | None:
        local = datetime.fromtimestamp(after_s, self.tz)
        wall = local.replace(tzinfo=None)
        best = self._second_pass(wall, after_s) if self.expr.periodic_hour and local.fold == 0 else None
        found = self._scan(wall, after_s)
        if best is None or (found is not None and found < best):
            return found
        return best

    def _second_pass(self, wall: datetime, after_s: int) -> int | None:
        """While in the first pass of a repeated hour, a periodic schedule also fires in the second pass."""
        shift = _offset_s(self.tz, wall, 0) - _offset_s(self.tz, wall, 1)
        if shift <= 0:
            return None
        candidate = self.expr.next_wall(wall - timedelta(seconds=shift))
        if candidate is None:
            return None
        late = _offset_s(self.tz, candidate, 1)
        if _offset_s(self.tz, candidate, 0) == late:
            return None
        instant = _wall_seconds(candidate) - late
        return instant if instant > after_s else None

    def _scan(self, wall: datetime, after_s: int) -> int | None:
        while True:
            candidate = self.expr.next_wall(wall)
            if candidate is None:
                return None
            seconds = _wall_seconds(candidate)
            early = seconds - _offset_s(self.tz, candidate, 0)
            late = seconds - _offset_s(self.tz, candidate, 1)
            if early == late or (early < late and early > after_s):
                return early
            if early < late:
                if self.expr.periodic_hour:
                    return late
                # A fixed time already fired in the first pass of the repeated hour: skip to its end.
                end = _transition(self.tz, early, late)
                wall = candidate + timedelta(seconds=end - early) - _SECOND
                continue
            gap_end = _transition(self.tz, late, early)
            if not self.expr.periodic_hour:
                return gap_end
            wall = datetime.fromtimestamp(gap_end, self.tz).replace(tzinfo=None) - _SECOND


class Schedule:
    """A parsed schedule; see the module docstring and docs/schedules.md for the exact semantics."""

    __slots__ = ("expression", "canonical", "timezone", "_rule", "_anchor_ms", "_start_ms", "_end_ms")

    def __init__(
        self,
        expression: str,
        timezone_name: str,
        rule: Rule,
        anchor_ms: int | None = None,
        start_ms: int | None = None,
        end_ms: int | None = None,
    ) -> None:
        self.expression = expression
        self.canonical = rule.canonical
        self.timezone = timezone_name
        self._rule = rule
        self._anchor_ms = anchor_ms
        self._start_ms = start_ms
        self._end_ms = end_ms

    def next_after_ms(self, after_ms: int) -> int | None:
        if self._start_ms is not None and after_ms < self._start_ms:
            after_ms = self._start_ms - 1
        found = self._rule.next_s(after_ms // 1000)
        if found is None:
            return None
        found_ms = found * 1000
        if self._end_ms is not None and found_ms >= self._end_ms:
            return None
        return found_ms

    def next_after(self, after: datetime) -> datetime | None:
        found = self.next_after_ms(_floor_ms(after))
        return None if found is None else datetime.fromtimestamp(found / 1000, UTC)

    def preview(self, after: datetime, count: int) -> list[datetime]:
        result: list[datetime] = []
        cursor: datetime | None = after
        while len(result) < count and cursor is not None:
            cursor = self.next_after(cursor)
            if cursor is not None:
                result.append(cursor)
        return result

    def describe(self) -> str:
        return f"cron {self.canonical} ({self.timezone})"

    def spec(self) -> dict[str, Any]:
        return {
            "expression": self.expression,
            "canonical": self.canonical,
            "timezone": self.timezone,
            "anchor_ms": self._anchor_ms,
            "start_at_ms": self._start_ms,
            "end_at_ms": self._end_ms,
        }


def _floor_ms(moment: datetime) -> int:
    if moment.tzinfo is None:
        raise ValueError("naive datetime: schedules only take timezone-aware datetimes")
    return (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)


def _optional_ms(moment: datetime | None, field: str) -> int | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        raise ScheduleError(f"{field} must include a UTC offset", field)
    return _floor_ms(moment)


def parse_schedule(
    expression: str,
    timezone: str = "UTC",
    *,
    anchor: datetime | None = None,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    now: datetime | None = None,
    min_interval_seconds: int = 1,
) -> Schedule:
    """Validate and parse a schedule; raises ScheduleError naming the offending field."""
    tz = zone(timezone)
    start_ms = _optional_ms(start_at, "start_at")
    end_ms = _optional_ms(end_at, "end_at")
    anchor_ms = _optional_ms(anchor, "anchor")
    if start_ms is not None and end_ms is not None and end_ms <= start_ms:
        raise ScheduleError("end_at must be after start_at", "end_at")
    if not isinstance(expression, str) or not expression.strip():
        raise ScheduleError("schedule is empty")
    rule = CronRule(parse_cron(expression.strip()), tz)
    return Schedule(expression, timezone, rule, anchor_ms, start_ms, end_ms)


@lru_cache(maxsize=SPEC_CACHE_SIZE)
def _from_key(
    expression: str, canonical: str, timezone_name: str, anchor: int | None, start: int | None, end: int | None
) -> Schedule:
    rule = CronRule(parse_cron(canonical), zone(timezone_name))
    return Schedule(expression, timezone_name, rule, anchor, start, end)


def from_spec(spec: dict[str, Any]) -> Schedule:
    """Rebuild a schedule from `Schedule.spec()`; cached, so the warm poller never re-parses."""
    return _from_key(
        spec.get("expression", spec["canonical"]),
        spec["canonical"],
        spec.get("timezone", "UTC"),
        spec.get("anchor_ms"),
        spec.get("start_at_ms"),
        spec.get("end_at_ms"),
    )
