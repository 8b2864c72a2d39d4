"""dateutil's walk over a rule's periods, counted: every period it examines (a day of FREQ=DAILY, a week, a
month, a year) is one step taken from a StepBudget, and the walk ends at the first period that begins after
the last date asked about.

dateutil walks period after period until it finds an occurrence: UNTIL only ends the walk at an occurrence
past it, so a rule that never matches (FREQ=WEEKLY;BYMONTH=2;BYMONTHDAY=30) walks to the year 9999, and a
rare one for years past the dates asked (dateutil/dateutil#1094, #1393 and #1441: no limit is offered).
Its period loop (`rrule._iter`) asks a helper object (`_iterinfo`) for each period's days; the copy of that
loop here is given a helper that counts and stops. Pinned python-dateutil (layers/common/requirements.txt);
tests/unit/calendars/test_walk.py drives a walk to exactly its budget, so a dateutil that changes the loop
fails there and at import, never silently uncounted.
"""
from __future__ import annotations

from datetime import date, datetime
from types import FunctionType
from typing import Any

from dateutil import rrule as dateutil_rrule


class StepLimitError(Exception):
    """A walk needed more steps than its budget had left."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"more than {limit} steps")
        self.limit = limit


class StepBudget:
    """The periods walks may still examine; one budget is shared by every rule of one expansion."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def take(self) -> None:
        if self.used >= self.limit:
            raise StepLimitError(self.limit)
        self.used += 1


class _PastLast(Exception):
    """The walk reached a period that begins after the last date asked about: nothing later is wanted."""


_DAYSETS = ("ydayset", "mdayset", "wdayset", "ddayset")  # one per FREQ of an all-day rule


class _CountingInfo(dateutil_rrule._iterinfo):  # type: ignore[name-defined,misc]
    """dateutil's per-walk helper, each period's day set counted and the walk stopped past `last`."""

    def __init__(self, rule: _CountedRule) -> None:
        super().__init__(rule)
        self.budget, self.last_ordinal = rule.budget, rule.last.toordinal()

    def _counted(self, found: tuple[list[Any], int, int]) -> tuple[list[Any], int, int]:
        if self.yearordinal + found[1] > self.last_ordinal:  # the period's first day (start index) is past `last`
            raise _PastLast
        self.budget.take()
        return found

    def ydayset(self, year: int, month: int, day: int) -> tuple[list[Any], int, int]:
        return self._counted(super().ydayset(year, month, day))

    def mdayset(self, year: int, month: int, day: int) -> tuple[list[Any], int, int]:
        return self._counted(super().mdayset(year, month, day))

    def wdayset(self, year: int, month: int, day: int) -> tuple[list[Any], int, int]:
        return self._counted(super().wdayset(year, month, day))

    def ddayset(self, year: int, month: int, day: int) -> tuple[list[Any], int, int]:
        return self._counted(super().ddayset(year, month, day))


def _counted_loop() -> Any:
    loop = dateutil_rrule.rrule._iter
    if "_iterinfo" not in loop.__code__.co_names or not all(hasattr(dateutil_rrule._iterinfo, n) for n in _DAYSETS):
        raise ImportError("python-dateutil's rrule walk changed: tickwork.calendars.walk cannot count its steps")
    names = {**vars(dateutil_rrule), "_iterinfo": _CountingInfo}
    return FunctionType(loop.__code__, names, loop.__name__, loop.__defaults__, loop.__closure__)


class _CountedRule(dateutil_rrule.rrule):  # type: ignore[misc]
    _iter = _counted_loop()

    def __init__(self, budget: StepBudget, last: date, **parts: Any) -> None:
        super().__init__(cache=False, **parts)
        self.budget, self.last = budget, last


def walk(parts: dict[str, Any], first: date, last: date, budget: StepBudget, most: int | None = None) -> list[date]:
    """The dates from `first` to `last` of the dateutil rule `parts` (rrule's keyword arguments, dtstart a
    midnight), the first `most` of them if given, each period examined taken from `budget` (StepLimitError
    when it runs out)."""
    rule = _CountedRule(budget, last, **parts)
    since = datetime.combine(first, datetime.min.time())
    found: list[date] = []
    try:
        for moment in rule:
            if moment.date() > last:
                break
            if moment >= since:
                found.append(moment.date())
                if len(found) == most:
                    break
    except _PastLast:
        pass
    return found
