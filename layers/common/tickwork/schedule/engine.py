"""Schedules: parse once, then answer "when is the first run strictly after t?" exactly, in the job's zone.

Pure: every instant comes in as an argument; nothing here reads the clock. The DST rules, with
examples, are in docs/schedules.md; `CronRule` is where they are implemented.
"""
from __future__ import annotations

from bisect import bisect_right
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from typing import Any, Protocol
from zoneinfo import ZoneInfo

from tickwork.errors import ScheduleError
from tickwork.schedule import hashing
from tickwork.schedule import text as schedule_text
from tickwork.schedule.cron import CronExpr, parse_cron
from tickwork.timeutil import LATEST, to_ms

_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_NAIVE_EPOCH = datetime(1970, 1, 1)
_UTC_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_DAY = 86400
_MS = timedelta(milliseconds=1)
# One entry per distinct job schedule a warm poller sees; 64k entries is a few tens of MB at most.
SPEC_CACHE_SIZE = 65536
_LATEST_MS = to_ms(LATEST)


class Rule(Protocol):
    canonical: str

    def next_ms(self, after_ms: int) -> int | None: ...

    def describe(self) -> str: ...


@lru_cache(maxsize=1024)
def zone(name: str) -> ZoneInfo:
    """The IANA zone `name`, or ScheduleError(field="timezone")."""
    try:
        return ZoneInfo(name)
    except (KeyError, ValueError, OSError, TypeError) as exc:
        raise ScheduleError("unknown time zone; use an IANA name like Europe/Paris", "timezone") from exc


def _offset_at(tz: ZoneInfo, instant: int) -> int:
    return int(datetime.fromtimestamp(instant, tz).utcoffset().total_seconds())  # type: ignore[union-attr]


def _wall_offset(tz: ZoneInfo, wall: int, fold: int) -> int:
    local = (_NAIVE_EPOCH + timedelta(seconds=wall)).replace(tzinfo=tz, fold=fold)
    return int(local.utcoffset().total_seconds())  # type: ignore[union-attr]


def _transition(tz: ZoneInfo, before: int, after: int) -> int:
    """First second in (before, after] already on the UTC offset in force at `after`."""
    target = _offset_at(tz, after)
    while after - before > 1:
        middle = (before + after) // 2
        if _offset_at(tz, middle) == target:
            after = middle
        else:
            before = middle
    return after


@lru_cache(maxsize=4096)
def _transitions(tz: ZoneInfo, year: int) -> tuple[int, ...]:
    """UTC seconds at which `tz` changes offset during `year`: sampled daily, then pinned to the second."""
    start = (date(year, 1, 1).toordinal() - _EPOCH_ORDINAL) * _DAY
    end = (date(year + 1, 1, 1).toordinal() - _EPOCH_ORDINAL) * _DAY
    found: list[int] = []
    previous = _offset_at(tz, start)
    for sample in range(start + _DAY, end + 1, _DAY):
        offset = _offset_at(tz, sample)
        if offset != previous:
            found.append(_transition(tz, sample - _DAY, sample))
            previous = offset
    return tuple(found)


def _segment(tz: ZoneInfo, instant: int) -> tuple[int, int, int, int]:
    """(start, end, offset, offset before start): an interval around `instant` with one UTC offset."""
    year = date.fromordinal(_EPOCH_ORDINAL + instant // _DAY).year
    changes = _transitions(tz, year - 1) + _transitions(tz, year) + _transitions(tz, year + 1)
    index = bisect_right(changes, instant)
    start = changes[index - 1] if index else (date(year - 1, 1, 1).toordinal() - _EPOCH_ORDINAL) * _DAY
    end = changes[index] if index < len(changes) else (date(year + 2, 1, 1).toordinal() - _EPOCH_ORDINAL) * _DAY
    return start, end, _offset_at(tz, instant), _offset_at(tz, start - 1)


class CronRule:
    """Cron in a zone: the instants its matching wall times denote under the DST rules.

    A wall time that exists once fires then. In a repeated (fall-back) hour a periodic hour field
    fires in both passes, a fixed one only in the first. A wall time in a spring-forward gap fires
    at the first instant after the gap for a fixed hour field, and not at all for a periodic one.
    """

    __slots__ = ("canonical", "expr", "tz", "_segment")

    def __init__(self, expr: CronExpr, tz: ZoneInfo) -> None:
        self.canonical = expr.canonical
        self.expr = expr
        self.tz = tz
        self._segment = (0, 0, 0, 0)

    def describe(self) -> str:
        return schedule_text.describe_cron(self.expr.fields, self.tz.key)

    def next_ms(self, after_ms: int) -> int | None:
        found = self.next_s(after_ms // 1000)
        return None if found is None else found * 1000

    def next_s(self, after: int) -> int | None:
        start, end, offset, before = self._segment
        if not start <= after < end:
            start, end, offset, before = self._segment = _segment(self.tz, after)
        wall = self.expr.next_wall_s(after + offset)
        if wall is None:
            return None
        instant = wall - offset
        # Same offset all the way, and not the second pass of a repeated wall time: plain arithmetic.
        if instant < end and (before <= offset or self.expr.periodic_hour or instant >= start + before - offset):
            return instant
        return self._next_across_transition(after)

    def _next_across_transition(self, after: int) -> int | None:
        local = datetime.fromtimestamp(after, self.tz)
        wall = after + int(local.utcoffset().total_seconds())  # type: ignore[union-attr]
        found = self._scan(wall, after)
        if self.expr.periodic_hour and local.fold == 0:
            second = self._second_pass(wall, after)
            if second is not None and (found is None or second < found):
                return second
        return found

    def _second_pass(self, wall: int, after: int) -> int | None:
        """From the first pass of a repeated hour, a periodic schedule's next run may be in the second."""
        late_offset = _wall_offset(self.tz, wall, 1)
        shift = _wall_offset(self.tz, wall, 0) - late_offset
        if shift <= 0:
            return None
        repeat_start = _transition(self.tz, after, after + shift) + late_offset
        candidate = self.expr.next_wall_s(repeat_start - 1)
        if candidate is None or candidate >= repeat_start + shift:
            return None
        return candidate - late_offset

    def _scan(self, wall: int, after: int) -> int | None:
        while (candidate := self.expr.next_wall_s(wall)) is not None:
            fold0 = candidate - _wall_offset(self.tz, candidate, 0)
            fold1 = candidate - _wall_offset(self.tz, candidate, 1)
            if fold0 == fold1:
                return fold0
            if fold0 < fold1:  # repeated: PEP 495 makes fold=0 the first pass
                if fold0 > after:
                    return fold0
                if self.expr.periodic_hour:
                    return fold1
                # A fixed time already ran in the first pass: resume after the repeated hour.
                wall = candidate + _transition(self.tz, fold0, fold1) - fold0 - 1
                continue
            gap_end = _transition(self.tz, fold1, fold0)  # skipped: fold=0 reads it with the old offset
            if not self.expr.periodic_hour:
                return gap_end
            wall = gap_end + _offset_at(self.tz, gap_end) - 1
        return None


class RateRule:
    """Every `interval_ms`, counted from `anchor_ms` in real elapsed time, whatever the wall clock does."""

    __slots__ = ("canonical", "interval_ms", "anchor_ms")

    def __init__(self, canonical: str, interval_ms: int, anchor_ms: int) -> None:
        self.canonical = canonical
        self.interval_ms = interval_ms
        self.anchor_ms = anchor_ms

    def describe(self) -> str:
        return schedule_text.describe_rate(self.canonical)

    def next_ms(self, after_ms: int) -> int | None:
        return self.anchor_ms + ((after_ms - self.anchor_ms) // self.interval_ms + 1) * self.interval_ms


class AtRule:
    """Once, at a wall time in the job's zone (a gap time runs when the gap ends, a repeated one the first time)."""

    __slots__ = ("canonical", "at_ms", "zone_name")

    def __init__(self, canonical: str, at_ms: int, zone_name: str) -> None:
        self.canonical = canonical
        self.at_ms = at_ms
        self.zone_name = zone_name

    def describe(self) -> str:
        return schedule_text.describe_at(self.canonical, self.zone_name)

    def next_ms(self, after_ms: int) -> int | None:
        return self.at_ms if after_ms < self.at_ms else None


def resolve_wall(tz: ZoneInfo, wall: int) -> int:
    """UTC second of a one-off wall time: the first pass if repeated, the end of the gap if skipped."""
    fold0 = wall - _wall_offset(tz, wall, 0)
    fold1 = wall - _wall_offset(tz, wall, 1)
    return fold0 if fold0 <= fold1 else _transition(tz, fold1, fold0)


class Schedule:
    """A parsed schedule: a rule (cron, rate or at), the optional [start_at, end_at) window, and the job's
    spread offset, added to every run. `canonical` is the form written (H kept); the rule's is resolved."""

    __slots__ = ("expression", "canonical", "timezone", "_rule", "_anchor_ms", "_start_ms", "_end_ms", "_hash_key",
                 "_offset_ms")

    def __init__(
        self,
        expression: str,
        timezone_name: str,
        rule: Rule,
        window: tuple[int | None, int | None, int | None] = (None, None, None),
        per_job: tuple[str, str | None, int] | None = None,
    ) -> None:
        """`per_job`: (the canonical form with its H, the key H was resolved with, the offset in ms)."""
        self.expression = expression
        self.canonical, self._hash_key, self._offset_ms = per_job or (rule.canonical, None, 0)
        self.timezone = timezone_name
        self._rule = rule
        self._anchor_ms, self._start_ms, self._end_ms = window

    @property
    def offset_seconds(self) -> int:
        """The spread offset every run is shifted by."""
        return self._offset_ms // 1000

    def next_after_ms(self, after_ms: int) -> int | None:
        """First run strictly after `after_ms` (epoch ms) inside [start_at, end_at), or None."""
        if self._start_ms is not None and after_ms < self._start_ms:
            after_ms = self._start_ms - 1
        found = self._rule.next_ms(after_ms - self._offset_ms)
        end_ms = _LATEST_MS if self._end_ms is None else min(self._end_ms, _LATEST_MS)
        if found is None or found + self._offset_ms >= end_ms:
            return None
        return found + self._offset_ms

    def period_ms(self, from_ms: int, to_ms: int) -> int | None:
        """The fixed real-time step between consecutive runs from `from_ms` to `to_ms`, when there is one:
        a rate(), or a plain cron period (`*/5 * * * * *`) while the zone keeps one UTC offset. None otherwise."""
        rule = self._rule
        if isinstance(rule, RateRule):
            return rule.interval_ms
        if isinstance(rule, CronRule) and rule.expr.period:
            from_s, to_s = (from_ms - self._offset_ms) // 1000, (to_ms - self._offset_ms) // 1000
            start, end, _, _ = _segment(rule.tz, from_s)
            if start <= from_s and to_s < end:
                return rule.expr.period * 1000
        return None

    def next_after(self, after: datetime) -> datetime | None:
        found = self.next_after_ms(floor_ms(after))
        return None if found is None else _UTC_EPOCH + found * _MS

    def preview(self, after: datetime, count: int) -> list[datetime]:
        runs: list[datetime] = []
        cursor = self.next_after(after)
        while cursor is not None and len(runs) < count:
            runs.append(cursor)
            cursor = self.next_after(cursor)
        return runs

    def describe(self) -> str:
        return schedule_text.describe_window(self._rule.describe(), self._start_ms, self._end_ms)

    def stored(self) -> Schedule:
        """This schedule as parsing its canonical form gives it (what a job stores is that form)."""
        if self.expression == self.canonical:
            return self
        return Schedule(self.canonical, self.timezone, self._rule, (self._anchor_ms, self._start_ms, self._end_ms),
                        (self.canonical, self._hash_key, self._offset_ms))

    def spec(self) -> dict[str, Any]:
        """Plain JSON for `from_spec`; the per-job keys only when used, so plain schedules share one spec."""
        spec = {
            "expression": self.expression,
            "canonical": self.canonical,
            "timezone": self.timezone,
            "anchor_ms": self._anchor_ms,
            "start_at_ms": self._start_ms,
            "end_at_ms": self._end_ms,
        }
        if self._hash_key is not None:
            spec["hash_key"] = self._hash_key
        if self._offset_ms:
            spec["offset_ms"] = self._offset_ms
        return spec


def floor_ms(moment: datetime) -> int:
    """Epoch milliseconds of an aware datetime, rounded down so "strictly after" keeps its meaning."""
    if moment.tzinfo is None:
        raise ValueError("naive datetime: schedules only take timezone-aware datetimes")
    return (moment - _UTC_EPOCH) // _MS


def _ceil_ms(moment: datetime) -> int:
    """Rounded up: a run at whole millisecond t is at or after `moment` exactly when t >= this."""
    if moment.tzinfo is None:
        raise ValueError("naive datetime: schedules only take timezone-aware datetimes")
    return -(-(moment - _UTC_EPOCH) // _MS)


def _window_ms(moment: datetime | None, field: str) -> int | None:
    if moment is None:
        return None
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ScheduleError(f"{field} must include a UTC offset", field)
    return _ceil_ms(moment)


def _rule(canonical: str, tz: ZoneInfo, anchor_ms: int, hash_key: str | None = None) -> Rule:
    """Build the rule for a canonical expression (cron, rate(...) or at(...)); H resolved with `hash_key`."""
    if canonical.startswith("rate("):
        return RateRule(canonical, schedule_text.rate_ms(canonical), anchor_ms)
    if canonical.startswith("at("):
        return AtRule(canonical, 1000 * resolve_wall(tz, schedule_text.at_wall_seconds(canonical)), tz.key)
    if hash_key is not None:
        canonical = hashing.resolve(canonical, hash_key)
    return _cron_rule(canonical, tz.key)


@lru_cache(maxsize=4096)
def _cron_rule(canonical: str, zone_name: str) -> CronRule:
    return CronRule(parse_cron(canonical), zone(zone_name))


def min_gap_seconds(schedule: Schedule) -> int | None:
    """The shortest time between two runs of `schedule`, in seconds; None for a one-off at()."""
    return _gap_seconds(schedule._rule)


def _gap_seconds(rule: Rule) -> int | None:
    if isinstance(rule, CronRule):
        return rule.expr.min_gap_seconds()
    if isinstance(rule, RateRule):
        return rule.interval_ms // 1000
    return None


def _check_interval(rule: Rule, minimum: int) -> None:
    interval = _gap_seconds(rule)
    if interval is not None and interval < minimum:
        raise ScheduleError(f"interval of {interval}s is below the minimum of {minimum}s")


def _check_spread(rule: Rule, spread_seconds: int) -> None:
    interval = _gap_seconds(rule)
    if interval is not None and spread_seconds > interval:
        raise ScheduleError(f"must be at most the schedule's shortest interval ({interval} s)", "spread_seconds")


def _check_window(schedule: Schedule, rule: Rule, start_ms: int | None, end_ms: int | None) -> None:
    if start_ms is not None and end_ms is not None and end_ms <= start_ms:
        raise ScheduleError("end_at must be after start_at", "end_at")
    probe = start_ms if start_ms is not None else getattr(rule, "at_ms", None)
    if end_ms is not None and probe is not None and schedule.next_after_ms(probe - 1) is None:
        raise ScheduleError("schedule never fires between start_at and end_at", "end_at")


def parse_schedule(
    expression: str,
    timezone: str = "UTC",
    *,
    anchor: datetime | None = None,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    now: datetime | None = None,
    min_interval_seconds: int = 1,
    hash_key: str | None = None,
    spread_seconds: int = 0,
) -> Schedule:
    """Validate and parse a schedule; raises ScheduleError naming the field at fault and why.

    `anchor` is the instant a rate() counts from (default: start_at, else the Unix epoch);
    `now` is only used to reject an at() that is already past. `hash_key` (the job id) resolves H and
    derives the offset of `spread_seconds` (docs/schedules.md); both need it.
    """
    if not isinstance(expression, str) or not expression.strip():
        raise ScheduleError("schedule is empty")
    tz = zone(timezone)
    start_ms, end_ms = _window_ms(start_at, "start_at"), _window_ms(end_at, "end_at")
    anchor_ms = start_ms if anchor is None else _ceil_ms(anchor)
    canonical = schedule_text.canonical(expression)
    per_job = hashing.per_job(canonical, hash_key, spread_seconds)
    rule = _rule(canonical, tz, anchor_ms or 0, per_job[1])
    _check_interval(rule, min_interval_seconds)
    _check_spread(rule, spread_seconds)
    if isinstance(rule, AtRule) and now is not None and rule.at_ms <= floor_ms(now):
        raise ScheduleError("at() time is in the past")
    kept_anchor = anchor_ms if isinstance(rule, RateRule) else None
    schedule = Schedule(expression, timezone, rule, (kept_anchor, start_ms, end_ms), per_job)
    _check_window(schedule, rule, start_ms, end_ms)
    return schedule


@lru_cache(maxsize=SPEC_CACHE_SIZE)
def _from_key(key: tuple[str, str, str, int | None, int | None, int | None, str | None, int]) -> Schedule:
    expression, canonical, zone_name, anchor_ms, start_ms, end_ms, hash_key, offset_ms = key
    rule = _rule(canonical, zone(zone_name), anchor_ms or 0, hash_key)
    return Schedule(expression, zone_name, rule, (anchor_ms, start_ms, end_ms), (canonical, hash_key, offset_ms))


def from_spec(spec: dict[str, Any]) -> Schedule:
    """Rebuild a schedule from `Schedule.spec()`. Cached: the warm poller calls this for every due job.
    A spec written before H and spread existed has neither key: no H, offset 0."""
    try:
        key = (
            spec.get("expression") or spec["canonical"],
            spec["canonical"],
            spec.get("timezone") or "UTC",
            spec.get("anchor_ms"),
            spec.get("start_at_ms"),
            spec.get("end_at_ms"),
            spec.get("hash_key"),
            int(spec.get("offset_ms") or 0),
        )
    except (KeyError, TypeError, AttributeError) as exc:
        raise ScheduleError(f"schedule spec is missing its canonical expression: {spec!r}") from exc
    return _from_key(key)
