"""One RRULE of an all-day event (RFC 5545 3.3.10): read from its text, checked, costed, and walked with
dateutil (tickwork.calendars.walk) from a start moved as near the dates asked about as its INTERVAL allows.

dateutil takes the day parts a rule leaves out from its start (FREQ=YEARLY from a Christmas start is
BYMONTH=12;BYMONTHDAY=25); `explicit` writes them in, so the walk may begin at any later period of the rule's
grid (every INTERVAL-th day, week, month or year from the start's) and give the same dates. A rule with COUNT
counts from its start, so it is kept as UNTIL its last date (`without_count`) when the calendar is read.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from typing import Any

import icalendar
from dateutil import rrule as dateutil_rrule

from tickwork.calendars.bounds import LAST_DATE, RANGE_TEXT, in_range
from tickwork.calendars.walk import StepBudget, walk

FREQUENCIES = ("DAILY", "WEEKLY", "MONTHLY", "YEARLY")
WEEKDAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
_PARTS = ("FREQ", "UNTIL", "COUNT", "INTERVAL", "BYDAY", "BYMONTHDAY", "BYYEARDAY", "BYWEEKNO", "BYMONTH",
          "BYSETPOS", "WKST")
_TIME_PARTS = frozenset({"BYHOUR", "BYMINUTE", "BYSECOND"})
_RANGES = {"BYMONTH": (1, 12), "BYMONTHDAY": (1, 31), "BYYEARDAY": (1, 366), "BYWEEKNO": (1, 53),
           "BYSETPOS": (1, 366), "INTERVAL": (1, 1000), "COUNT": (1, 1000)}
_UNSIGNED = frozenset({"BYMONTH", "INTERVAL", "COUNT"})
_BYDAY = re.compile(r"^([+-]?\d{1,2})?(MO|TU|WE|TH|FR|SA|SU)$")
_DATEUTIL_FREQ = {"DAILY": dateutil_rrule.DAILY, "WEEKLY": dateutil_rrule.WEEKLY,
                  "MONTHLY": dateutil_rrule.MONTHLY, "YEARLY": dateutil_rrule.YEARLY}
# The most dates one period can hold: a BYSETPOS past it picks nothing.
_PERIOD_DAYS = {"DAILY": 1, "WEEKLY": 7, "MONTHLY": 31, "YEARLY": 366}
_MONTH_DAYS = {365: (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31),
               366: (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)}


class RuleError(ValueError):
    """A rule that cannot be read: the reason, never the rule's text."""


@dataclass(frozen=True)
class Rule:
    """An RRULE as dateutil reads it. `byday`: (ordinal, weekday 0=MO), ordinal 0 for every such weekday."""

    text: str
    freq: str
    interval: int = 1
    count: int | None = None
    until: date | None = None
    bymonth: tuple[int, ...] = ()
    bymonthday: tuple[int, ...] = ()
    byyearday: tuple[int, ...] = ()
    byweekno: tuple[int, ...] = ()
    byday: tuple[tuple[int, int], ...] = ()
    bysetpos: tuple[int, ...] = ()
    wkst: int = 0

    @classmethod
    def parse(cls, text: str) -> Rule:
        """Raises RuleError naming the part and the reason."""
        try:
            parts = {str(name).upper(): values for name, values in icalendar.vRecur.from_ical(text).items()}
        except Exception:  # noqa: BLE001 - icalendar raises many kinds for a malformed rule
            raise RuleError("RRULE is not a valid value") from None
        if _TIME_PARTS & set(parts):
            raise RuleError("RRULE of an all-day event cannot name hours, minutes or seconds")
        freq = str((parts.get("FREQ") or [""])[0]).upper()
        if freq not in FREQUENCIES:
            raise RuleError("RRULE FREQ must be DAILY, WEEKLY, MONTHLY or YEARLY")
        if set(parts) - set(_PARTS):
            raise RuleError(f"RRULE may have only {', '.join(_PARTS)}")
        if "COUNT" in parts and "UNTIL" in parts:
            raise RuleError("RRULE cannot have both COUNT and UNTIL")
        numbers = {name: _numbers(name, parts.get(name) or ()) for name in _RANGES}
        return cls(text, freq, (numbers["INTERVAL"] or (1,))[0], (numbers["COUNT"] or (None,))[0],
                   _until(parts.get("UNTIL")), numbers["BYMONTH"], numbers["BYMONTHDAY"], numbers["BYYEARDAY"],
                   numbers["BYWEEKNO"], _weekdays(parts.get("BYDAY") or ()), numbers["BYSETPOS"],
                   WEEKDAYS.index(str((parts.get("WKST") or ["MO"])[0]).upper()))

    def problem(self, start: date) -> str | None:
        """Why an event from `start` cannot have this rule (None: it can)."""
        if self.until is not None and not in_range(self.until):
            return f"RRULE UNTIL outside {RANGE_TEXT}"
        in_month = self.freq == "MONTHLY" or (self.freq == "YEARLY" and self.bymonth)
        if in_month and any(abs(n) > 5 for n, _ in self.byday):
            # (dateutil fails with an IndexError walking one, rather than giving nothing)
            return "RRULE BYDAY's number of a weekday in a month must be in 1-5"
        explicit = self.explicit(start)
        if self.bysetpos and min(map(abs, self.bysetpos)) > _PERIOD_DAYS[self.freq]:
            return f"RRULE BYSETPOS asks for a position past the last date of a {self.freq.lower()} period"
        if not explicit._some_day_matches():
            return ("RRULE never matches: no date has the month, day of the month, day of the year, week and "
                    "weekday position it asks for")
        try:
            dateutil_rrule.rrule(**self._dateutil_parts(start, start))
        except Exception:  # noqa: BLE001 - dateutil's own checks, whatever it raises
            return "RRULE is not a valid value"
        return None

    def explicit(self, start: date) -> Rule:
        """The rule with the day parts dateutil takes from `start` written in (they then no longer depend on it)."""
        if self.byweekno or self.byyearday or self.bymonthday or self.byday:
            return self
        if self.freq == "YEARLY":
            return replace(self, bymonth=self.bymonth or (start.month,), bymonthday=(start.day,))
        if self.freq == "MONTHLY":
            return replace(self, bymonthday=(start.day,))
        if self.freq == "WEEKLY":
            return replace(self, byday=((0, start.weekday()),))
        return self

    def cost(self, days: int) -> int:
        """At most how many steps walking it for one year takes (tickwork.calendars.walk) for an event of `days`
        days: its occurrences from days - 1 before 1 January to 31 December, from the period of its grid that
        holds the first of those (moved there, or its start if that is later) to the one that holds the last."""
        back, k = days - 1, self.interval
        if self.freq == "DAILY":
            return (365 + back + k - 1) // k + 1
        if self.freq == "WEEKLY":
            return (365 + back + 7 * k - 1) // (7 * k) + 1
        if self.freq == "MONTHLY":
            return (11 + _months_back(back) + k - 1) // k + 1
        return (min(back, 1) + k - 1) // k + 1

    def occurrences(self, start: date, first: date, last: date, budget: StepBudget) -> list[date]:
        """The dates from `first` to `last` the rule gives an event from `start` (its start itself only if the rule
        gives it), each period walked taken from `budget`."""
        until = last if self.until is None else min(last, self.until)
        begin = start if self.count is not None else self._walk_start(start, first)
        if begin > until:
            return []
        return walk(self._dateutil_parts(start, begin), first, until, budget)

    def without_count(self, start: date, budget: StepBudget) -> Rule:
        """The same rule with UNTIL its last date instead of COUNT (without an end if that is past LAST_DATE),
        walked from `start` with `budget`."""
        if self.count is None:
            return self
        found = walk(self._dateutil_parts(start, start), start, LAST_DATE, budget, most=self.count)
        text = ";".join(part for part in self.text.split(";") if not part.upper().startswith("COUNT="))
        if len(found) < self.count:
            return replace(self, text=text, count=None)
        return replace(self, text=f"{text};UNTIL={found[-1]:%Y%m%d}", count=None, until=found[-1])

    def _walk_start(self, start: date, near: date) -> date:
        """The latest start of a period of the rule's grid at or before `near` (`start` if that is later)."""
        if near <= start:
            return start
        k = self.interval
        if self.freq == "DAILY":
            return start + timedelta(days=(near - start).days // k * k)
        if self.freq == "WEEKLY":
            first_week = start - timedelta(days=(start.weekday() - self.wkst) % 7)
            return max(start, first_week + timedelta(weeks=(near - first_week).days // 7 // k * k))
        if self.freq == "MONTHLY":
            months = (near.year * 12 + near.month - start.year * 12 - start.month) // k * k
            index = start.year * 12 + start.month - 1 + months
            return start if months == 0 else date(index // 12, index % 12 + 1, 1)
        years = (near.year - start.year) // k * k
        return start if years == 0 else date(start.year + years, 1, 1)

    def _dateutil_parts(self, start: date, begin: date) -> dict[str, Any]:
        rule = self.explicit(start)
        parts: dict[str, Any] = {"freq": _DATEUTIL_FREQ[rule.freq], "dtstart": _midnight(begin),
                                 "interval": rule.interval, "wkst": rule.wkst}
        if rule.until is not None:
            parts["until"] = _midnight(rule.until)
        if rule.count is not None:
            parts["count"] = rule.count
        for name in ("bymonth", "bymonthday", "byyearday", "byweekno", "bysetpos"):
            if getattr(rule, name):
                parts[name] = getattr(rule, name)
        if rule.byday:
            days = dateutil_rrule.weekdays
            parts["byweekday"] = [days[weekday](n) if n else days[weekday] for n, weekday in rule.byday]
        return parts

    # ------------------------------------------------------------ can it ever match?

    def _some_day_matches(self) -> bool:
        """Whether some date of a 365- or 366-day year passes the rule's month, day-of-month, day-of-year, week
        and weekday-position parts. Sound, not complete: each part is read as allowing at least every date it
        can (a week number any date it falls on in some year), so False means dateutil never gives a date;
        plain weekdays are left out (each date is every weekday in some year)."""
        for yearlen, lengths in _MONTH_DAYS.items():
            weeks = self._week_days(yearlen)
            yearday = 0
            for month, length in enumerate(lengths, 1):
                if not self.bymonth or month in self.bymonth:
                    for day in range(1, length + 1):
                        if self._day_matches(day, length, yearday + day, yearlen, weeks):
                            return True
                yearday += length
        return False

    def _day_matches(self, day: int, length: int, yearday: int, yearlen: int, weeks: set[int] | None) -> bool:
        if self.bymonthday and day not in self.bymonthday and day - length - 1 not in self.bymonthday:
            return False
        if self.byyearday and yearday not in self.byyearday and yearday - yearlen - 1 not in self.byyearday:
            return False
        if weeks is not None and yearday not in weeks:
            return False
        numbered = [n for n, _ in self.byday if n] if self.freq in ("MONTHLY", "YEARLY") else []
        if not numbered:
            return True
        # The n-th weekday of the month (MONTHLY, or YEARLY with BYMONTH) or of the year is in its n-th 7 days.
        position, span = (day, length) if self.freq == "MONTHLY" or self.bymonth else (yearday, yearlen)
        return any(7 * (n - 1) < position <= 7 * n if n > 0 else 7 * (-n - 1) < span - position + 1 <= -7 * n
                   for n in numbered)

    def _week_days(self, yearlen: int) -> set[int] | None:
        """Every day of the year (1-based) that one of BYWEEKNO's weeks may hold, whatever the year's first
        weekday, WKST and number of weeks (52 or 53); the first days of a year may be the last week of the year
        before, its last days week 1 of the next. None: no BYWEEKNO."""
        if not self.byweekno:
            return None
        days: set[int] = set()
        for number in self.byweekno:
            for weeks in (52, 53):
                week = number if number > 0 else weeks + number + 1
                if 1 <= week <= weeks:
                    days.update(range(max(1, 7 * week - 9), min(yearlen, 7 * week + 3) + 1))
                    if week == 1:
                        days.update(range(yearlen - 6, yearlen + 1))
                    if week >= 52 or number == -1:
                        days.update(range(1, 4))
        return days


def _numbers(name: str, values: Any) -> tuple[int, ...]:
    low, high = _RANGES[name]
    found = []
    for value in values:
        try:
            number = int(str(value))
        except ValueError:
            raise RuleError(f"RRULE {name} must be in {low}-{high}") from None
        if not low <= abs(number) <= high or (number < 0 and name in _UNSIGNED):
            raise RuleError(f"RRULE {name} must be in {low}-{high}")
        found.append(number)
    return tuple(found)


def _weekdays(values: Any) -> tuple[tuple[int, int], ...]:
    found = []
    for value in values:
        match = _BYDAY.match(str(value).upper())
        if match is None:
            raise RuleError("RRULE is not a valid value")
        number = int(match.group(1) or 0)
        if match.group(1) and not 1 <= abs(number) <= 53:
            raise RuleError("RRULE BYDAY's number of a weekday must be in 1-53")
        found.append((number, WEEKDAYS.index(match.group(2))))
    return tuple(found)


def _until(values: Any) -> date | None:
    if not values:
        return None
    value = values[0]
    if isinstance(value, datetime):
        return value.date()  # its wall date: the walk ignores time zones, as dateutil's ignoretz
    if not isinstance(value, date):
        raise RuleError("RRULE UNTIL must be a date")
    return value


def _months_back(days: int) -> int:
    """At most how many months back from January a date `days` days before 1 January is."""
    if days == 0:
        return 0
    return max(12 * (year - (day := date(year, 1, 1) - timedelta(days=days)).year) + 1 - day.month
               for year in (2001, 2002))  # after a leap year, and after a common one


def _midnight(day: date) -> datetime:
    return datetime.combine(day, datetime.min.time())
