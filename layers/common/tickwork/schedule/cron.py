"""Cron expressions on naive local wall time, counted in "wall seconds" since 1970-01-01 00:00 wall clock.

Time zones and DST live in `tickwork.schedule.engine`; this module only knows the calendar.
Syntax and the day-of-month/day-of-week rule: docs/schedules.md.
"""
from __future__ import annotations

import calendar
from bisect import bisect_left
from datetime import date, datetime, timedelta
from functools import lru_cache

from tickwork.errors import ScheduleError

MACROS = {
    "@yearly": "0 0 0 1 1 *",
    "@annually": "0 0 0 1 1 *",
    "@monthly": "0 0 0 1 * *",
    "@weekly": "0 0 0 * * SUN",
    "@daily": "0 0 0 * * *",
    "@midnight": "0 0 0 * * *",
    "@hourly": "0 0 * * * *",
}
FIELD_NAMES = ("second", "minute", "hour", "day-of-month", "month", "day-of-week")
_BOUNDS = ((0, 59), (0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
SEC, MIN, HOUR, DOM, MON, DOW = range(6)
MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
DAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_NAMES = {MON: {n: i + 1 for i, n in enumerate(MONTH_NAMES)}, DOW: {n: i for i, n in enumerate(DAY_NAMES)}}
# Long enough for Feb 29 on a given weekday (28 years) twice over, the sparsest schedule cron can say.
HORIZON_YEARS = 60
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_PROBE_FROM = (date(2000, 1, 1).toordinal() - _EPOCH_ORDINAL) * 86400 - 1
_DAY_CACHE_LIMIT = 4096
_UNKNOWN_NAME = {MON: "unknown name; use JAN-DEC or 1-12", DOW: "unknown name; use SUN-SAT or 0-7"}


# Numbers are read with isdecimal(), not isdigit(): `¹` is a digit that int() cannot read. New schedules
# are ASCII (schedule_text.canonical); a canonical form stored before that with another script's digits
# (`٣`, which int() reads as 3) still reads as it did, so no stored job stops running.


def _fail(field: int, reason: str) -> ScheduleError:
    # The reason never quotes the expression: error bodies end up in client logs (docs/api.md).
    return ScheduleError(f"{FIELD_NAMES[field]} field: {reason}")


def _value(field: int, text: str) -> int:
    names = _NAMES.get(field, {})
    if text in names:
        return names[text]
    if not text.isdecimal():
        if text.isalpha():
            raise _fail(field, _UNKNOWN_NAME.get(field, "unknown name"))
        raise _fail(field, "a value is not a number")
    value = int(text)
    low, high = _BOUNDS[field]
    if not low <= value <= high:
        raise _fail(field, f"a value is out of range {low}-{high}")
    return value


def _step(field: int, text: str) -> int:
    if not text.isdecimal():
        raise _fail(field, "a step must be a whole number")
    if int(text) < 1:
        raise _fail(field, "a step must be at least 1")
    return int(text)


def _range(field: int, term: str) -> set[int]:
    """`*`, `v`, `a-b`, each optionally `/step`; `v/step` runs to the end of the field."""
    base, slash, step_text = term.partition("/")
    step = _step(field, step_text) if slash else 1
    low, high = _BOUNDS[field]
    if base in ("*", "?"):
        first, last = low, high
    elif "-" in base:
        start, _, end = base.partition("-")
        first, last = _value(field, start), _value(field, end)
        if field == DOW and last == 0 and first > 0:
            last = 7  # SAT-SUN and FRI-SUN mean what they say.
        if first > last:
            raise _fail(field, "a range is reversed")
    else:
        first = _value(field, base)
        last = high if slash else first
    values = set(range(first, last + 1, step))
    return {v % 7 for v in values} if field == DOW else values


class _Days:
    """The day-of-month and day-of-week fields, with L, LW, nW, nL and n#k."""

    __slots__ = ("dom", "dom_last", "dom_last_weekday", "dom_near", "dow", "dow_nth", "dow_last", "day_and")

    def __init__(self, dom_text: str, dow_text: str) -> None:
        self.dom: set[int] = set()
        self.dom_last = self.dom_last_weekday = False
        self.dom_near: set[int] = set()
        self.dow: set[int] = set()
        self.dow_nth: set[tuple[int, int]] = set()
        self.dow_last: set[int] = set()
        for term in _terms(DOM, dom_text):
            self._dom_term(term)
        for term in _terms(DOW, dow_text):
            self._dow_term(term)
        # Vixie cron: if either field starts with `*`, a day must match both; otherwise either.
        self.day_and = dom_text[0] in "*?" or dow_text[0] in "*?"

    def _dom_term(self, term: str) -> None:
        if term == "L":
            self.dom_last = True
        elif term == "LW":
            self.dom_last_weekday = True
        elif term.endswith("W") or (term.startswith("W") and term[1:].isdecimal()):
            self.dom_near.add(_value(DOM, term.strip("W")))
        else:
            self.dom |= _range(DOM, term)

    def _dow_term(self, term: str) -> None:
        if "#" in term:
            day, _, nth = term.partition("#")
            if not nth.isdecimal() or not 1 <= int(nth) <= 5:
                raise _fail(DOW, "the week number after # must be 1-5")
            self.dow_nth.add((_value(DOW, day) % 7, int(nth)))
        elif term == "L":
            raise _fail(DOW, "L needs a day before it, e.g. 5L or FRIL for the last Friday")
        elif term.endswith("L") or (term.startswith("L") and term[1:].isdecimal()):
            self.dow_last.add(_value(DOW, term.strip("L")) % 7)
        else:
            self.dow |= _range(DOW, term)

    def in_month(self, year: int, month: int) -> tuple[int, ...]:
        first, size = calendar.monthrange(year, month)
        dom = {d for d in self.dom if d <= size}
        dom.update(_nearest_weekday(first, size, n) for n in self.dom_near if n <= size)
        if self.dom_last:
            dom.add(size)
        if self.dom_last_weekday:
            dom.add(_nearest_weekday(first, size, size))
        dow = {d for d in range(1, size + 1) if self._dow_matches((first + d) % 7, d, size)}
        return tuple(sorted(dom & dow if self.day_and else dom | dow))

    def _dow_matches(self, weekday: int, day: int, size: int) -> bool:
        return (
            weekday in self.dow
            or (weekday, (day + 6) // 7) in self.dow_nth
            or (weekday in self.dow_last and day + 7 > size)
        )


def _nearest_weekday(first: int, size: int, day: int) -> int:
    """Quartz `nW`: the weekday nearest `day`, never leaving the month (`first` is Python's Monday=0)."""
    weekday = (first + day - 1) % 7
    if weekday == 5:
        return day - 1 if day > 1 else day + 2
    if weekday == 6:
        return day + 1 if day < size else day - 2
    return day


def _terms(field: int, text: str) -> list[str]:
    terms = text.split(",")
    if "" in terms:
        raise _fail(field, "empty item in a list")
    if "?" in text and (field not in (DOM, DOW) or text != "?"):
        raise _fail(field, "? is only allowed alone, in day-of-month or day-of-week")
    return terms


class CronExpr:
    """A validated cron expression; `canonical` is six fields, seconds first."""

    __slots__ = ("canonical", "fields", "periodic_hour", "period", "_s", "_m", "_h", "_months", "_days", "_cache")

    def __init__(self, canonical: str) -> None:
        self.canonical = canonical
        self.fields = tuple(canonical.split(" "))
        self._s, self._m, self._h = (tuple(sorted(_union(i, self.fields[i]))) for i in (SEC, MIN, HOUR))
        self._months = frozenset(_union(MON, self.fields[MON]))
        self._days = _Days(self.fields[DOM], self.fields[DOW])
        self._cache: dict[tuple[int, int], tuple[int, ...]] = {}
        # A `*` or stepped hour asks for a period, not for particular hours: DST keeps real elapsed time.
        self.periodic_hour = self.fields[HOUR][0] == "*" or "/" in self.fields[HOUR]
        self.period = _period(self.fields)

    def next_wall_s(self, after: int) -> int | None:
        """First matching wall second strictly after `after`, None if none within HORIZON_YEARS."""
        if self.period:
            return (after // self.period + 1) * self.period
        days, second_of_day = divmod(after + 1, 86400)
        day = date.fromordinal(_EPOCH_ORDINAL + days)
        hour, rest = divmod(second_of_day, 3600)
        year, month, moment = day.year, day.month, (hour, *divmod(rest, 60))
        start_day, last_year = day.day, min(year + HORIZON_YEARS, 9999)
        while year <= last_year:
            if month in self._months:
                found = self._in_month(year, month, start_day, moment)
                if found is not None:
                    return found
            year, month = (year + 1, 1) if month == 12 else (year, month + 1)
            start_day, moment = 1, (0, 0, 0)
        return None

    def next_wall(self, after: datetime) -> datetime | None:
        """`next_wall_s` on naive datetimes, for tests and tools."""
        found = self.next_wall_s(_wall_seconds(after))
        return None if found is None else datetime(1970, 1, 1) + timedelta(seconds=found)

    def _in_month(self, year: int, month: int, start_day: int, moment: tuple[int, int, int]) -> int | None:
        days = self.days_in_month(year, month)
        for index in range(bisect_left(days, start_day), len(days)):
            day = days[index]
            found = self._time_from(*moment) if day == start_day else (self._h[0], self._m[0], self._s[0])
            if found is not None:
                hour, minute, second = found
                ordinal = date(year, month, day).toordinal() - _EPOCH_ORDINAL
                return ordinal * 86400 + hour * 3600 + minute * 60 + second
        return None

    def days_in_month(self, year: int, month: int) -> tuple[int, ...]:
        key = (year, month)
        days = self._cache.get(key)
        if days is None:
            if len(self._cache) >= _DAY_CACHE_LIMIT:
                self._cache.clear()
            days = self._cache[key] = self._days.in_month(year, month)
        return days

    def _time_from(self, hour: int, minute: int, second: int) -> tuple[int, int, int] | None:
        """Earliest allowed (hour, minute, second) at or after the given one on the same day."""
        hours, minutes, seconds = self._h, self._m, self._s
        h = bisect_left(hours, hour)
        if h < len(hours) and hours[h] == hour:
            m = bisect_left(minutes, minute)
            if m < len(minutes) and minutes[m] == minute:
                s = bisect_left(seconds, second)
                if s < len(seconds):
                    return hour, minute, seconds[s]
                m += 1
            if m < len(minutes):
                return hour, minutes[m], seconds[0]
            h += 1
        return (hours[h], minutes[0], seconds[0]) if h < len(hours) else None

    def min_gap_seconds(self) -> int:
        """Shortest wall-clock gap between two runs (exact within a day, a lower bound across days)."""
        s, m, h = self._s, self._m, self._h
        last_s, first_s = s[-1], s[0]
        gaps = [86400 - (h[-1] * 3600 + m[-1] * 60 + last_s) + (h[0] * 3600 + m[0] * 60 + first_s)]
        if len(s) > 1:
            gaps.append(_min_step(s))
        if len(m) > 1:
            gaps.append(60 * (_min_step(m) - 1) + 60 - last_s + first_s)
        if len(h) > 1:
            gaps.append(3600 * (_min_step(h) - 1) + 3600 - (m[-1] * 60 + last_s) + (m[0] * 60 + first_s))
        return min(gaps)


def _union(field: int, text: str) -> set[int]:
    values: set[int] = set()
    for term in _terms(field, text):
        values |= _range(field, term)
    return values


def _min_step(values: tuple[int, ...]) -> int:
    return min(b - a for a, b in zip(values, values[1:]))


def _period(fields: tuple[str, ...]) -> int:
    """Seconds between runs when the expression is a plain wall-clock period (`*/5 * * * * *`), else 0."""
    units = (1, 60, 3600)
    cycles = (60, 60, 24)
    for index in range(3):
        head, rest = fields[:index], fields[index + 1 :]
        if all(f == "0" for f in head) and all(f == "*" for f in rest):
            step = 1 if fields[index] == "*" else _star_step(fields[index])
            if step and cycles[index] % step == 0:
                return step * units[index]
    return 0


def _star_step(text: str) -> int:
    prefix, _, step = text.partition("/")
    return int(step) if prefix == "*" and step.isdecimal() else 0


def _wall_seconds(wall: datetime) -> int:
    return (wall.toordinal() - _EPOCH_ORDINAL) * 86400 + wall.hour * 3600 + wall.minute * 60 + wall.second


def normalize(expression: str) -> str:
    """Six fields, seconds first, single-spaced and upper-case; macros expanded."""
    text = " ".join(expression.split()).upper()
    macro = MACROS.get(text.lower())
    if macro is not None:
        return macro
    fields = text.split(" ")
    if len(fields) == 5:
        fields.insert(0, "0")
    elif len(fields) != 6:
        raise ScheduleError(
            f"cron needs 5 fields (minute hour day-of-month month day-of-week) or 6 (second first), "
            f"got {len(fields)}"
        )
    return " ".join(fields)


@lru_cache(maxsize=4096)
def parse_cron(expression: str) -> CronExpr:
    """Validate `expression` (5 or 6 fields, or a macro); raises ScheduleError saying what is wrong."""
    expr = CronExpr(normalize(expression))
    if expr.next_wall_s(_PROBE_FROM) is None:
        raise ScheduleError("schedule never fires")
    return expr
