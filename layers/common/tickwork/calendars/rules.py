"""Which local dates a calendar excludes: its explicit dates and its all-day events (tickwork.calendars.events),
recurring ones expanded a year at a time when first asked about, each year in at most EXPANSION_STEPS counted
steps of dateutil's walk (tickwork.calendars.walk). Pure: no clock, no I/O.

A calendar is stored compiled (`to_json`): the explicit dates and, per all-day event of its iCalendar
text, the first date, the number of days it covers, its RRULEs, RDATEs and EXDATEs. The iCalendar text is
parsed once, when the calendar is written (tickwork.calendars.ical), and everything it holds checked against
tickwork.calendars.bounds (tickwork.calendars.checks); the poller only reads this form. A compiled form
written before those bounds (by an older release) is read with what is out of bounds left out, each part
left out named in the calendar's `warnings`: never an exception in the poller or the API.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Mapping, Sequence

from tickwork.calendars.bounds import EXPANSION_STEPS, FIRST_DATE, HORIZON_YEARS, LAST_DATE
from tickwork.calendars.checks import bounded_dates, bounded_events, readable_dates, readable_events
from tickwork.calendars.events import Event, Span, covered
from tickwork.calendars.recurrence import RuleError
from tickwork.calendars.walk import StepBudget, StepLimitError

__all__ = ["BOUNDS_KEY", "Calendar", "Event", "excluded_by"]
# Years of expanded dates one calendar keeps: a poller looks at this year and the next; a preview at most
# the years of its horizon (each costs one expansion).
_YEARS_CACHED = 16
# Marks a compiled form whose every part was checked against the bounds when it was written (an older
# release's has none, and is checked as it is read).
BOUNDS_KEY, BOUNDS_VERSION = "bounds", 1


@dataclass
class Calendar:
    """A named calendar as the schedule reads it: `excludes(local_date)`. `horizon`: the years (first, last)
    its recurring events are expanded for; `warnings`: what was left out of it, and why; `steps`: how many
    its expansions have walked (each year at most EXPANSION_STEPS)."""

    name: str
    dates: frozenset[date] = frozenset()
    events: tuple[Event, ...] = ()
    horizon: tuple[int, int] = (FIRST_DATE.year, LAST_DATE.year)
    warnings: list[str] = field(default_factory=list, compare=False)
    steps: int = field(default=0, init=False, compare=False)  # walked by its expansions so far
    _years: dict[int, frozenset[date]] = field(default_factory=dict, init=False, repr=False, compare=False)
    _fixed: dict[int, list[Span]] | None = field(default=None, init=False, repr=False, compare=False)

    def excludes(self, day: date) -> bool:
        if day in self.dates:
            return True
        return bool(self.events) and day in self._year(day.year)

    def within(self, start: date) -> Calendar:
        """This calendar for an answer that starts at `start` (a preview's, `upcoming`'s): its recurring events
        expanded only from the year before `start`'s to HORIZON_YEARS - 1 after it."""
        horizon = (max(self.horizon[0], start.year - 1), min(self.horizon[1], start.year + HORIZON_YEARS - 1))
        return Calendar(self.name, self.dates, self.events, horizon, self.warnings)

    def _year(self, year: int) -> frozenset[date]:
        found = self._years.get(year)
        if found is None:
            if len(self._years) >= _YEARS_CACHED:
                self._years.clear()
            found = self._years[year] = frozenset(covered(self._spans(year), year))
        return found

    def _spans(self, year: int) -> list[Span]:
        """The occurrences that cover a date of `year`: those of events without rules found in an index by year
        (built once), the others' walked with one budget of EXPANSION_STEPS (what a PUT lets in stays inside
        it: Rule.cost); a rule that cannot be walked is left out and warned of."""
        spans = list(self._fixed_spans().get(year, ()))
        recur, budget = self.horizon[0] <= year <= self.horizon[1], StepBudget(EXPANSION_STEPS)
        for number, event in enumerate(self.events, 1):
            if not event.rrules:
                continue
            try:
                spans.extend((start, event.days) for start in event.starts_in(year, budget, recur))
                continue
            except StepLimitError:
                self._warn(f"{year}: expanding took more than {EXPANSION_STEPS} steps at event {number}; "
                           "its recurrences and the later events' were left out")
                recur = False
            except RuleError as error:
                self._warn(f"event {number}: {error}; its recurrences were left out")
            except (LookupError, ArithmeticError, ValueError):  # dateutil failing on a rule no check foresaw
                self._warn(f"event {number}: RRULE cannot be expanded; its recurrences were left out")
            spans.extend((start, event.days) for start in event.starts_in(year, budget, recur=False))
        self.steps += budget.used
        return spans

    def _fixed_spans(self) -> dict[int, list[Span]]:
        """The occurrences of the events without rules, by each year they cover."""
        if self._fixed is None:
            self._fixed = defaultdict(list)
            for event in self.events:
                for start in [] if event.rrules else event.fixed_starts():
                    for year in {start.year, date.fromordinal(start.toordinal() + event.days - 1).year}:
                        self._fixed[year].append((start, event.days))
        return self._fixed

    def _warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)

    def upcoming(self, since: date, count: int, years: int) -> list[date]:
        """The first `count` dates from `since` on that it excludes: its explicit ones, and its events' in the
        `years` years from `since`'s (a year's dates are all later than the years before, so it stops early)."""
        found = {day for day in self.dates if day >= since}
        ahead: set[date] = set()
        for year in range(since.year, since.year + years) if self.events else ():
            ahead.update(day for day in self._year(year) if day >= since)
            if len(ahead) >= count:
                break
        return sorted(found | ahead)[:count]

    def to_json(self) -> dict[str, Any]:
        """The compiled form of a calendar whose parts were checked (tickwork.calendars.checks)."""
        return {"dates": sorted(d.isoformat() for d in self.dates), "events": [e.to_json() for e in self.events],
                BOUNDS_KEY: BOUNDS_VERSION}

    @classmethod
    def from_json(cls, name: str, raw: Mapping[str, Any]) -> Calendar:
        """A stored calendar; one written before the bounds read with what is out of them left out, and warned of."""
        if raw.get(BOUNDS_KEY) == BOUNDS_VERSION:
            return cls(name, frozenset(map(date.fromisoformat, raw.get("dates", ()))),
                       tuple(Event.from_json(e) for e in raw.get("events", ())))
        warnings: list[str] = []

        def left_out(where: str, reason: str) -> None:
            warnings.append(f"{where}: {reason}; left out")

        dates = bounded_dates(readable_dates(raw.get("dates", ()), left_out), left_out)
        events = bounded_events(readable_events(raw.get("events", ()), left_out), left_out)
        return cls(name, frozenset(dates), events, warnings=warnings)


def excluded_by(calendars: Sequence[Calendar], day: date) -> str | None:
    """The name of the first of `calendars` that excludes `day`, or None."""
    for calendar in calendars:
        if calendar.excludes(day):
            return calendar.name
    return None
