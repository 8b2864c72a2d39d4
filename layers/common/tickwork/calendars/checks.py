"""Every part of a calendar checked against tickwork.calendars.bounds, in one place for both ways a calendar is
read: a PUT's `problem` raises (a 400 naming `dates.N`, or `ical` and the event), a stored compiled form's
(one an older release wrote) collects a warning and the part is left out (tickwork.calendars.rules)."""
from __future__ import annotations

from dataclasses import replace
from datetime import date, timedelta
from functools import partial
from typing import Any, Callable, Iterable

from tickwork.calendars.bounds import (
    COUNT_STEPS,
    EXPANSION_STEPS,
    FIRST_DATE,
    LAST_DATE,
    MAX_EVENT_DAYS,
    MAX_RULES,
    MAX_RULES_PER_EVENT,
    RANGE_TEXT,
    in_range,
)
from tickwork.calendars.events import Event
from tickwork.calendars.recurrence import Rule, RuleError
from tickwork.calendars.walk import StepBudget, StepLimitError

# (where: `event 3` or `dates.4`, reason): raises at a PUT, is collected as a warning on reading.
Problem = Callable[[str, str], None]


def bounded_dates(dates: Iterable[tuple[int, date]], problem: Problem) -> list[date]:
    """The (position, date)s inside the bounds; `problem("dates.N", reason)` for each one outside."""
    kept = []
    for position, day in dates:
        if in_range(day):
            kept.append(day)
        else:
            problem(f"dates.{position}", f"must be from {FIRST_DATE.isoformat()} to {LAST_DATE.isoformat()}")
    return kept


def bounded_events(events: Iterable[tuple[int, Event]], problem: Problem) -> tuple[Event, ...]:
    """The numbered events with every part inside the bounds: dates (DTSTART, the last day covered, RDATE,
    EXDATE, UNTIL), RRULEs an event and a calendar, rules that can match, their cost a year together at most
    EXPANSION_STEPS; a rule with COUNT kept as UNTIL its last date. `problem("event N", reason)` for each part
    that is not, which is left out (the whole event for its DTSTART or length)."""
    kept: list[Event] = []
    rules = _RulesLetIn()
    for number, event in events:
        report = partial(problem, f"event {number}")
        reason = _span_problem(event)
        if reason is not None:
            report(reason)
            continue
        rdates = tuple(_in_bounds(event.rdates, "RDATE", event.days, report))
        exdates = tuple(_in_bounds(event.exdates, "EXDATE", 1, report))
        kept.append(replace(event, rrules=rules.of(event, report), rdates=rdates, exdates=exdates))
    return tuple(kept)


def _span_problem(event: Event) -> str | None:
    if not in_range(event.start):
        return f"DTSTART outside {RANGE_TEXT}"
    if not 1 <= event.days <= MAX_EVENT_DAYS:
        return f"must cover 1 to {MAX_EVENT_DAYS} days (DTEND is the day after the last), got {event.days}"
    if event.start + timedelta(days=event.days - 1) > LAST_DATE:
        return f"DTEND or DURATION reaches past {LAST_DATE.isoformat()}"
    return None


def _in_bounds(dates: Iterable[date], name: str, days: int, report: Callable[[str], None]) -> Iterable[date]:
    for day in dates:
        if in_range(day) and day + timedelta(days=days - 1) <= LAST_DATE:
            yield day
        else:
            report(f"{name} outside {RANGE_TEXT}")


class _RulesLetIn:
    """The RRULEs a calendar has let in so far: how many, their cost a year (Rule.cost) together, and the
    steps its rules with COUNT have taken to find their last dates."""

    def __init__(self) -> None:
        self.count = self.steps = 0
        self.counting = StepBudget(COUNT_STEPS)

    def of(self, event: Event, report: Callable[[str], None]) -> tuple[str, ...]:
        """The event's rules let in (its first MAX_RULES_PER_EVENT at most)."""
        kept: list[str] = []
        if len(event.rrules) > MAX_RULES_PER_EVENT:
            report(f"at most {MAX_RULES_PER_EVENT} RRULEs an event, got {len(event.rrules)}")
        for text in event.rrules[:MAX_RULES_PER_EVENT]:
            if self.count == MAX_RULES:
                report(f"at most {MAX_RULES} RRULEs a calendar")
                break
            rule = self._checked(text, event)
            if isinstance(rule, str):
                report(rule)
                continue
            kept.append(rule.text)
            self.count, self.steps = self.count + 1, self.steps + rule.cost(event.days)
        return tuple(kept)

    def _checked(self, text: str, event: Event) -> Rule | str:
        """The rule as kept, or why it is not."""
        try:
            rule = Rule.parse(text)
            reason = rule.problem(event.start)
            if reason is None and self.steps + rule.cost(event.days) > EXPANSION_STEPS:
                reason = (f"its RRULEs would take more than {EXPANSION_STEPS} steps to expand a year, with those of "
                          "the events before it (a step is a day of a DAILY rule, a week of WEEKLY, a month of "
                          "MONTHLY, a year of YEARLY, each divided by INTERVAL)")
            return reason if reason is not None else rule.without_count(event.start, self.counting)
        except RuleError as error:
            return str(error)
        except (LookupError, ArithmeticError, ValueError):  # dateutil failing on a rule no check foresaw
            return "RRULE cannot be expanded"
        except StepLimitError:
            return (f"its RRULE with COUNT takes more than {COUNT_STEPS} steps, with those of the events before "
                    "it, to find its last date: give UNTIL instead")


def readable_dates(values: Iterable[Any], problem: Problem) -> Iterable[tuple[int, date]]:
    for position, value in enumerate(values):
        try:
            yield position, date.fromisoformat(value)
        except (TypeError, ValueError):
            problem(f"dates.{position}", "not a date")


def readable_events(values: Iterable[Any], problem: Problem) -> Iterable[tuple[int, Event]]:
    for number, value in enumerate(values, 1):
        try:
            yield number, Event.from_json(value)
        except (LookupError, TypeError, AttributeError, ValueError, OverflowError):
            problem(f"event {number}", "not a readable event")
