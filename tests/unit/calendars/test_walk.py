"""The work of expanding a calendar is a count of steps (periods dateutil examines), not CPU time and not
occurrences: a walk stops at the first period past the dates asked about (dateutil alone walks a rule that
never matches to the year 9999), a year of a calendar takes at most EXPANSION_STEPS, driven here to exactly
that, and an answer of the API expands recurring events only within its horizon."""
from __future__ import annotations

from datetime import date, datetime

import pytest
from dateutil import rrule

from tickwork.calendars.bounds import EXPANSION_STEPS, HORIZON_YEARS
from tickwork.calendars.ical import parse_ical
from tickwork.calendars.recurrence import Rule
from tickwork.calendars.rules import Calendar, Event
from tickwork.calendars.walk import StepBudget, StepLimitError, walk

IMPOSSIBLE_WEEKLY = "FREQ=WEEKLY;BYMONTH=2;BYMONTHDAY=30"


def ics(*events: str) -> str:
    body = "".join(f"BEGIN:VEVENT\r\nUID:{n}\r\n{e}\r\nEND:VEVENT\r\n" for n, e in enumerate(events))
    return f"BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//tests//EN\r\n{body}END:VCALENDAR\r\n"


def test_a_walk_takes_a_step_per_period_and_stops_at_the_first_past_the_last_date() -> None:
    daily, weekly = StepBudget(10_000), StepBudget(10_000)
    days = walk({"freq": rrule.DAILY, "dtstart": datetime(2028, 1, 1)}, date(2028, 1, 1), date(2028, 12, 31), daily)
    assert (len(days), daily.used) == (366, 366)
    # dateutil alone walks this one to the year 9999 (0.8 s of CPU each time); counted, it stops after 2026.
    never = walk({"freq": rrule.WEEKLY, "dtstart": datetime(2026, 1, 1), "bymonth": [2], "bymonthday": [30]},
                 date(2026, 1, 1), date(2026, 12, 31), weekly)
    assert (never, weekly.used) == ([], 53)  # 2026's weeks from Thursday 1 January, the 53rd holding 31 December


def test_a_walk_past_its_budget_raises_after_exactly_the_budget() -> None:
    budget = StepBudget(100)
    with pytest.raises(StepLimitError):
        walk({"freq": rrule.DAILY, "dtstart": datetime(2026, 1, 1)}, date(2026, 1, 1), date(2026, 12, 31), budget)
    assert budget.used == 100


def test_a_calendar_at_its_bound_expands_a_year_in_exactly_expansion_steps() -> None:
    # Daily rules of two 135-day events: each walks 365 + 135 days of a leap year (Rule.cost).
    events = parse_ical(ics(*[f"DTSTART;VALUE=DATE:20200101\r\nDURATION:P{d}D\r\nRRULE:FREQ=DAILY" for d in (135, 135)]))
    assert sum(Rule.parse(e.rrules[0]).cost(e.days) for e in events) == EXPANSION_STEPS
    calendar = Calendar("c", frozenset(), events)
    assert calendar.excludes(date(2028, 6, 1)) and calendar.steps == EXPANSION_STEPS and calendar.warnings == []


def test_a_calendar_past_its_bound_stops_at_exactly_expansion_steps_and_says_so() -> None:
    """Not one a PUT lets in (built here as an older release could have stored it): the budget still holds."""
    over = (Event(date(2020, 1, 1), 366, ("FREQ=DAILY",)),) * 2 + (Event(date(2028, 3, 1), 1, ("FREQ=YEARLY",)),)
    calendar = Calendar("c", frozenset(), over)
    assert calendar.excludes(date(2028, 1, 1)) and calendar.steps == EXPANSION_STEPS
    assert calendar.excludes(date(2028, 3, 1))  # the later event's own date still counts
    assert calendar.warnings == [f"2028: expanding took more than {EXPANSION_STEPS} steps at event 2; its "
                                 "recurrences and the later events' were left out"]


def test_a_rule_from_long_ago_walks_from_near_the_year_asked_yearly_ones_included() -> None:
    for text, start in [("FREQ=YEARLY", date(1970, 12, 25)), ("FREQ=MONTHLY", date(1970, 1, 31)),
                        ("FREQ=WEEKLY;INTERVAL=3", date(1970, 1, 7)), ("FREQ=DAILY;INTERVAL=7", date(1970, 1, 2))]:
        calendar = Calendar("c", frozenset(), (Event(start, 1, (text,)),))
        full = rrule.rrulestr(text, dtstart=datetime.combine(start, datetime.min.time()))
        expected = [m.date() for m in full.between(datetime(2200, 1, 1), datetime(2200, 12, 31), inc=True)]
        assert calendar.upcoming(date(2200, 1, 1), 100, years=1) == expected
        assert calendar.steps <= Rule.parse(text).cost(1), text


def test_the_horizon_keeps_an_answers_expansions_to_the_years_near_its_start() -> None:
    events = parse_ical(ics("DTSTART;VALUE=DATE:20201225\r\nRRULE:FREQ=YEARLY",
                            "DTSTART;VALUE=DATE:20450704\r\nRDATE;VALUE=DATE:20460704\r\nRRULE:FREQ=YEARLY"))
    calendar = Calendar("c", frozenset({date(2040, 1, 1)}), events).within(date(2026, 6, 1))
    assert calendar.horizon == (2025, 2026 + HORIZON_YEARS - 1)
    assert calendar.excludes(date(2025, 12, 25)) and calendar.excludes(date(2030, 12, 25))
    assert not calendar.excludes(date(2031, 12, 25)) and not calendar.excludes(date(2047, 7, 4))
    # Past it, what needs no walk still counts: explicit dates, an event's own date, its RDATEs.
    assert calendar.excludes(date(2040, 1, 1)) and calendar.excludes(date(2045, 7, 4)) and calendar.excludes(date(2046, 7, 4))
    steps = calendar.steps
    assert not calendar.excludes(date(2100, 12, 25)) and calendar.steps == steps
