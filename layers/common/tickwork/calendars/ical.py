"""A calendar's iCalendar text (RFC 5545) read once, when it is written, into all-day events
(tickwork.calendars.rules.Event): every VEVENT must be all-day (DTSTART;VALUE=DATE), may span several
days (DTEND or DURATION in whole days) and may recur (RRULE by day, week, month or year; RDATE; EXDATE).

Every refusal is an InvalidInputError naming `ical` and saying which event and why, never quoting the text;
what a calendar may hold (dates, rules, their cost) is decided in tickwork.calendars.rules.bounded_events,
the same check that reads a calendar stored before those bounds.
"""
from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any, Callable, TypeVar

import icalendar

from tickwork.calendars.bounds import MAX_EVENT_DAYS, MAX_EVENTS
from tickwork.calendars.checks import bounded_events
from tickwork.calendars.events import Event
from tickwork.errors import InvalidInputError

FIELD = "ical"
__all__ = ["FIELD", "MAX_EVENT_DAYS", "MAX_EVENTS", "parse_ical"]
T = TypeVar("T")


def parse_ical(text: str) -> tuple[Event, ...]:
    """The all-day events of an iCalendar text; raises InvalidInputError(field="ical") with the reason."""
    try:
        calendars = icalendar.Calendar.from_ical(text, multiple=True)
    except Exception:  # noqa: BLE001 - icalendar raises many kinds for a malformed file
        raise InvalidInputError(
            FIELD, "not an iCalendar file: a line is not NAME:value, or a block is not closed") from None
    if not calendars or any(c.name != "VCALENDAR" for c in calendars):
        raise InvalidInputError(FIELD, "not an iCalendar file: it must be a BEGIN:VCALENDAR ... END:VCALENDAR block")
    events = [component for calendar in calendars for component in calendar.walk("VEVENT")]
    if len(events) > MAX_EVENTS:
        raise InvalidInputError(FIELD, f"at most {MAX_EVENTS} events, got {len(events)}")
    parsed = [(number, _event(number, component)) for number, component in enumerate(events, 1)]
    return bounded_events(parsed, _refuse)


def _refuse(where: str, reason: str) -> None:
    raise InvalidInputError(FIELD, f"{where}: {reason}")


def _event(number: int, component: Any) -> Event:
    where = f"event {number}"
    start = _checked(where, "DTSTART", lambda: _date(component, "DTSTART", where, required=True))
    days = _checked(where, "DTEND or DURATION", lambda: _days(component, start, where))
    rules = _checked(where, "RRULE", lambda: _rrules(component))
    return Event(start, days, rules, _checked(where, "RDATE", lambda: _dates(component, "RDATE", where)),
                 _checked(where, "EXDATE", lambda: _dates(component, "EXDATE", where)))


def _checked(where: str, name: str, read: Callable[[], T]) -> T:
    """`read()`, where a value icalendar or dateutil cannot read is a 400 naming the property, not quoting it."""
    try:
        return read()
    except InvalidInputError:
        raise
    except Exception:  # noqa: BLE001 - icalendar and dateutil raise many kinds for a malformed value
        raise InvalidInputError(FIELD, f"{where}: {name} is not a valid value") from None


def _date(component: Any, name: str, where: str, required: bool = False) -> date:
    prop = component.get(name)
    if prop is None:
        if required:
            raise InvalidInputError(FIELD, f"{where}: has no {name}")
        raise KeyError(name)
    value = prop.dt
    if isinstance(value, datetime) or not isinstance(value, date):
        raise InvalidInputError(FIELD, f"{where}: not an all-day event ({name} has a time of day; "
                                        f"use {name};VALUE=DATE:YYYYMMDD)")
    return value


def _days(component: Any, start: date, where: str) -> int:
    if component.get("DTEND") is not None:
        days = (_date(component, "DTEND", where) - start).days
    elif component.get("DURATION") is not None:
        duration = component.get("DURATION").dt
        if not isinstance(duration, timedelta) or duration % timedelta(days=1):
            raise InvalidInputError(FIELD, f"{where}: DURATION must be whole days (P1D) for an all-day event")
        days = duration.days
    else:
        days = 1  # RFC 5545: an all-day DTSTART without DTEND or DURATION lasts that one day
    return days  # 1 to MAX_EVENT_DAYS: checked by bounded_events


def _rrules(component: Any) -> tuple[str, ...]:
    """Its RRULEs as text (each read and checked by bounded_events)."""
    found = component.get("RRULE")
    rules = found if isinstance(found, list) else [] if found is None else [found]
    return tuple(rule.to_ical().decode("ascii") for rule in rules)


def _dates(component: Any, name: str, where: str) -> tuple[date, ...]:
    found = component.get(name)
    props = found if isinstance(found, list) else [] if found is None else [found]
    values = [entry.dt for prop in props for entry in prop.dts]
    for value in values:
        if isinstance(value, datetime) or not isinstance(value, date):
            raise InvalidInputError(FIELD, f"{where}: {name} must list dates (VALUE=DATE) for an all-day event")
    return tuple(sorted(set(values)))

