"""A calendar's iCalendar text (RFC 5545) read once, when it is written, into all-day events
(tickwork.calendars.rules.Event): every VEVENT must be all-day (DTSTART;VALUE=DATE), may span several
days (DTEND or DURATION in whole days) and may recur (RRULE by day, week, month or year; RDATE; EXDATE).

Every refusal is an InvalidInputError naming `ical` and saying which event and why, never quoting the text.
"""
from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any, Callable, TypeVar

import icalendar

from tickwork.calendars.rules import Event
from tickwork.errors import InvalidInputError

FIELD = "ical"
# A holiday feed holds a few hundred events; past this a calendar is a data set, not a list of days off.
MAX_EVENTS = 2000
# Each recurring event is expanded for every year a schedule asks about (the poller: this one and the next); a
# holiday calendar has a few dozen.
MAX_RECURRING = 100
# An event covering more than a year is not a day off.
MAX_EVENT_DAYS = 366
# All-day events recur by day at the finest; a rule with times of day does not describe dates.
_FREQUENCIES = frozenset({"DAILY", "WEEKLY", "MONTHLY", "YEARLY"})
_TIME_PARTS = frozenset({"BYHOUR", "BYMINUTE", "BYSECOND"})
_RANGES = {"BYMONTH": (1, 12), "BYMONTHDAY": (1, 31), "BYYEARDAY": (1, 366), "BYWEEKNO": (1, 53),
           "BYSETPOS": (1, 366), "INTERVAL": (1, 1000), "COUNT": (1, 1000)}
T = TypeVar("T")


def parse_ical(text: str) -> tuple[Event, ...]:
    """The all-day events of an iCalendar text; raises InvalidInputError(field="ical") with the reason."""
    try:
        calendars = icalendar.Calendar.from_ical(text, multiple=True)
    except Exception:  # noqa: BLE001 - icalendar raises many kinds for a malformed file
        raise InvalidInputError(FIELD, "not an iCalendar file: a line is not NAME:value, or a block is not closed") from None
    if not calendars or any(c.name != "VCALENDAR" for c in calendars):
        raise InvalidInputError(FIELD, "not an iCalendar file: it must be a BEGIN:VCALENDAR ... END:VCALENDAR block")
    events = [component for calendar in calendars for component in calendar.walk("VEVENT")]
    if len(events) > MAX_EVENTS:
        raise InvalidInputError(FIELD, f"at most {MAX_EVENTS} events, got {len(events)}")
    parsed = tuple(_event(number, component) for number, component in enumerate(events, 1))
    recurring = sum(1 for event in parsed if event.rrules)
    if recurring > MAX_RECURRING:
        raise InvalidInputError(FIELD, f"at most {MAX_RECURRING} events with an RRULE, got {recurring}")
    return parsed


def _event(number: int, component: Any) -> Event:
    where = f"event {number}"
    start = _checked(where, "DTSTART", lambda: _date(component, "DTSTART", where, required=True))
    days = _checked(where, "DTEND or DURATION", lambda: _days(component, start, where))
    rules = _checked(where, "RRULE", lambda: _rrules(component, where))
    event = Event(start, days, rules, _checked(where, "RDATE", lambda: _dates(component, "RDATE", where)),
                  _checked(where, "EXDATE", lambda: _dates(component, "EXDATE", where)))
    _checked(where, "RRULE", event.ruleset)  # dateutil's own checks: refused now, not when first expanded
    return event


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
    if not 1 <= days <= MAX_EVENT_DAYS:
        raise InvalidInputError(FIELD, f"{where}: must cover 1 to {MAX_EVENT_DAYS} days (DTEND is the day after "
                                        f"the last), got {days}")
    return days


def _rrules(component: Any, where: str) -> tuple[str, ...]:
    found = component.get("RRULE")
    rules = found if isinstance(found, list) else [] if found is None else [found]
    texts = []
    for rule in rules:
        frequency = (rule.get("FREQ") or [""])[0]
        if str(frequency).upper() not in _FREQUENCIES:
            raise InvalidInputError(FIELD, f"{where}: RRULE FREQ must be DAILY, WEEKLY, MONTHLY or YEARLY")
        if _TIME_PARTS & {str(part).upper() for part in rule}:
            raise InvalidInputError(FIELD, f"{where}: RRULE of an all-day event cannot name hours, minutes or seconds")
        _check_ranges(rule, where)
        texts.append(rule.to_ical().decode("ascii"))
    return tuple(texts)


def _check_ranges(rule: Any, where: str) -> None:
    """What dateutil takes silently and then never fires on (BYMONTH=13, INTERVAL=0) is refused."""
    for part, (low, high) in _RANGES.items():
        for value in rule.get(part) or ():
            number = int(value)
            if not low <= abs(number) <= high or (number < 0 and part in ("BYMONTH", "INTERVAL", "COUNT")):
                raise InvalidInputError(FIELD, f"{where}: RRULE {part} must be in {low}-{high}")


def _dates(component: Any, name: str, where: str) -> tuple[date, ...]:
    found = component.get(name)
    props = found if isinstance(found, list) else [] if found is None else [found]
    values = [entry.dt for prop in props for entry in prop.dts]
    for value in values:
        if isinstance(value, datetime) or not isinstance(value, date):
            raise InvalidInputError(FIELD, f"{where}: {name} must list dates (VALUE=DATE) for an all-day event")
    return tuple(sorted(set(values)))

