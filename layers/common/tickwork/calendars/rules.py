"""Which local dates a calendar excludes: its explicit dates and its all-day events, recurring ones
expanded a year at a time when first asked about. Pure: no clock, no I/O.

A calendar is stored compiled (`to_json`): the explicit dates and, per all-day event of its iCalendar
text, the first date, the number of days it covers, its RRULEs, RDATEs and EXDATEs. The iCalendar text is
parsed once, when the calendar is written (tickwork.calendars.ical); the poller only reads this form.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any, Iterable, Mapping, Sequence

from dateutil import rrule

# Years of expanded dates one calendar keeps: a poller looks at this year and the next; a preview may
# ask about any year (each costs one expansion).
_YEARS_CACHED = 16


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

    def ruleset(self, near: date | None = None) -> rrule.rruleset | None:
        """The event's recurrence (None: it happens once); raises ValueError for a rule dateutil refuses.
        `near`: only occurrences from about then on are wanted, so a rule may start counting later."""
        if not self.rrules and not self.rdates:
            return None
        first = datetime.combine(self.start, datetime.min.time())
        rules = rrule.rruleset()
        rules.rdate(first)
        for text in self.rrules:
            start = datetime.combine(_later_start(text, self.start, near), datetime.min.time())
            rules.rrule(rrule.rrulestr(text, dtstart=start, ignoretz=True))  # type: ignore[arg-type]
        for extra in self.rdates:
            rules.rdate(datetime.combine(extra, datetime.min.time()))
        for excluded in self.exdates:
            rules.exdate(datetime.combine(excluded, datetime.min.time()))
        return rules

    def dates_in(self, year: int) -> Iterable[date]:
        """The dates of `year` this event covers (an occurrence begun late the year before included)."""
        first, last = date(year, 1, 1), date(year, 12, 31)
        rules = self.ruleset(near=first - timedelta(days=self.days))
        if rules is None:
            starts: Iterable[date] = [self.start]
        else:
            since = datetime.combine(first - timedelta(days=self.days - 1), datetime.min.time())
            until = datetime.combine(last, datetime.min.time())
            starts = (moment.date() for moment in rules.between(since, until, inc=True))
        for start in starts:
            for offset in range(self.days):
                day = start + timedelta(days=offset)
                if first <= day <= last:
                    yield day


def _later_start(text: str, start: date, near: date | None) -> date:
    """Where a rule may start counting so that its occurrences from `near` on are the same: dateutil walks
    every occurrence from the start, and a daily rule from the year 1 would take seconds to reach today. A
    rule with COUNT, or by month from a day some months lack, is not moved; yearly ones are cheap as they are."""
    parts = dict(part.split("=", 1) for part in text.upper().split(";") if "=" in part)
    if near is None or near <= start or "COUNT" in parts:
        return start
    interval = int(parts.get("INTERVAL", "1"))
    frequency = parts.get("FREQ")
    if frequency in ("DAILY", "WEEKLY"):
        step = interval * (7 if frequency == "WEEKLY" else 1)
        return start + timedelta(days=(near - start).days // step * step)
    if frequency == "MONTHLY" and start.day <= 28:
        months = ((near.year - start.year) * 12 + near.month - start.month) // interval * interval - interval
        if months > 0:
            total = start.month - 1 + months
            return start.replace(year=start.year + total // 12, month=total % 12 + 1)
    return start


@dataclass
class Calendar:
    """A named calendar as the schedule reads it: `excludes(local_date)`."""

    name: str
    dates: frozenset[date] = frozenset()
    events: tuple[Event, ...] = ()
    _years: dict[int, frozenset[date]] = field(default_factory=dict, repr=False, compare=False)

    def excludes(self, day: date) -> bool:
        if day in self.dates:
            return True
        return bool(self.events) and day in self._year(day.year)

    def _year(self, year: int) -> frozenset[date]:
        found = self._years.get(year)
        if found is None:
            if len(self._years) >= _YEARS_CACHED:
                self._years.clear()
            found = self._years[year] = frozenset(d for event in self.events for d in event.dates_in(year))
        return found

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
        return {"dates": sorted(d.isoformat() for d in self.dates), "events": [e.to_json() for e in self.events]}

    @classmethod
    def from_json(cls, name: str, raw: Mapping[str, Any]) -> Calendar:
        return cls(name, frozenset(map(date.fromisoformat, raw.get("dates", ()))),
                   tuple(Event.from_json(e) for e in raw.get("events", ())))


def excluded_by(calendars: Sequence[Calendar], day: date) -> str | None:
    """The name of the first of `calendars` that excludes `day`, or None."""
    for calendar in calendars:
        if calendar.excludes(day):
            return calendar.name
    return None
