"""An all-day event of a calendar (a VEVENT: `days` dates from `start`, again at each date its rules and RDATEs
give, less its EXDATEs), and the dates a year's occurrences cover. Pure: no clock, no I/O."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from functools import cached_property
from typing import Any, Iterable, Mapping

from tickwork.calendars.recurrence import Rule
from tickwork.calendars.walk import StepBudget

_DAY = timedelta(days=1)
Span = tuple[date, int]  # an occurrence: its first date, and how many days it covers


@dataclass(frozen=True)
class Event:
    """An all-day VEVENT: `days` dates from `start`, again at each date its rules give."""

    start: date
    days: int = 1
    rrules: tuple[str, ...] = ()
    rdates: tuple[date, ...] = ()
    exdates: tuple[date, ...] = ()

    def to_json(self) -> dict[str, Any]:
        raw: dict[str, Any] = {"start": self.start.isoformat(), "days": self.days}
        for name in ("rrules", "rdates", "exdates"):
            values = getattr(self, name)
            if values:
                raw[name] = [v if isinstance(v, str) else v.isoformat() for v in values]
        return raw

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Event:
        return cls(date.fromisoformat(raw["start"]), int(raw.get("days", 1)), tuple(raw.get("rrules", ())),
                   tuple(map(date.fromisoformat, raw.get("rdates", ()))),
                   tuple(map(date.fromisoformat, raw.get("exdates", ()))))

    @cached_property
    def rules(self) -> tuple[Rule, ...]:
        """Its RRULEs, read (RuleError for one that cannot be)."""
        return tuple(Rule.parse(text) for text in self.rrules)

    def fixed_starts(self) -> list[date]:
        """Where its occurrences begin, its rules left out: its start and RDATEs, less its EXDATEs (these apply
        only to an event that recurs, as a recurrence set's exclusions)."""
        if not self.rrules and not self.rdates:
            return [self.start]
        return sorted({self.start, *self.rdates} - set(self.exdates))

    def starts_in(self, year: int, budget: StepBudget, recur: bool = True) -> list[date]:
        """Where its occurrences that cover a date of `year` begin (from days - 1 before it); its rules walked
        with `budget` unless not `recur`."""
        since, last = date(year, 1, 1) - timedelta(days=self.days - 1), date(year, 12, 31)
        starts = {day for day in self.fixed_starts() if since <= day <= last}
        for rule in self.rules if recur else ():
            starts.update(rule.occurrences(self.start, since, last, budget))
        return sorted(starts.difference(self.exdates) if self.rrules else starts)

    def dates_in(self, year: int, budget: StepBudget, recur: bool = True) -> list[date]:
        """The dates of `year` this event covers (an occurrence begun late the year before included)."""
        return covered(((start, self.days) for start in self.starts_in(year, budget, recur)), year)


def covered(spans: Iterable[Span], year: int) -> list[date]:
    """The dates of `year` the spans cover, in order, each once: the work is the spans and the year's days,
    however much they overlap."""
    first, last = date(year, 1, 1), date(year, 12, 31)
    found: list[date] = []
    for start, days in sorted(spans):
        day = max(start, found[-1] + _DAY if found else first)
        end = min(start + (days - 1) * _DAY, last)
        while day <= end:
            found.append(day)
            day += _DAY
    return found
