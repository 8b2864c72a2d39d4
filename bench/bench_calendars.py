"""CPU seconds a calendar costs at the bounds (tickwork.calendars.bounds), beside a plain holiday calendar, in
one run:

    .venv/bin/python -m bench.bench_calendars

Per calendar: `upload`, what a PUT computes besides its SQL (the iCalendar text read and checked, the compiled
form, `upcoming` from it); `poller`, the poller's first expansion of it (the compiled form read, this year and
the next expanded: the years its due slots fall in); `old form`, the same read of it as the release before the
bounds stored it (checked as it is read); `preview`, a read-only preview of 100 yearly slots excluding by ten
such calendars (each expanded within its horizon). Each the best of REPEATS runs, process CPU time. The
calendars at the bounds have MAX_EVENTS events, 1,000 explicit dates and rules that cost EXPANSION_STEPS
steps a year together, of each frequency in turn; the issue's bombs are refused by a PUT now, so they are
timed as the release before stored them, read by the poller.
"""
from __future__ import annotations

import logging
import time
from datetime import date, datetime, timedelta, timezone
from typing import Any, Callable

from tickwork.calendars.bounds import COUNT_STEPS, EXPANSION_STEPS, MAX_EVENTS, MAX_RULES
from tickwork.calendars.recurrence import Rule
from tickwork.calendars.rules import Calendar
from tickwork.schedule.engine import parse_schedule
from tickwork.schedule.excluded import ExcludingSchedule
from tickwork.store.calendars import calendar_of
from tickwork.tenant.calendars import UPCOMING, UPCOMING_YEARS, compiled_row

REPEATS = 7
NOW = datetime(2028, 6, 1, 12, tzinfo=timezone.utc)  # a leap year: a daily rule walks its 366 days
TENANT = "tenant-1"
# Explicit dates and one-off events on other days than those the poller is timed on (an explicit date answers
# without an expansion).
EXPLICIT = [(date(2040, 1, 1) + timedelta(days=n)).isoformat() for n in range(1000)]
US_HOLIDAYS = [
    ("20200101", "FREQ=YEARLY", 1), ("20200120", "FREQ=YEARLY;BYMONTH=1;BYDAY=3MO", 1),
    ("20200217", "FREQ=YEARLY;BYMONTH=2;BYDAY=3MO", 1), ("20200525", "FREQ=YEARLY;BYMONTH=5;BYDAY=-1MO", 1),
    ("20200619", "FREQ=YEARLY", 1), ("20200704", "FREQ=YEARLY", 1), ("20200907", "FREQ=YEARLY;BYMONTH=9;BYDAY=1MO", 1),
    ("20201012", "FREQ=YEARLY;BYMONTH=10;BYDAY=2MO", 1), ("20201111", "FREQ=YEARLY", 1),
    ("20201126", "FREQ=YEARLY;BYMONTH=11;BYDAY=4TH", 2), ("20201225", "FREQ=YEARLY", 1),
]


def ics(events: list[tuple[str, str | None, int]]) -> str:
    """(DTSTART, RRULE or None, days) each."""
    body = "".join(f"BEGIN:VEVENT\r\nUID:{n}\r\nDTSTART;VALUE=DATE:{start}\r\nDURATION:P{days}D\r\n"
                   + (f"RRULE:{rule}\r\n" if rule else "") + "END:VEVENT\r\n"
                   for n, (start, rule, days) in enumerate(events))
    return f"BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//bench//EN\r\n{body}END:VCALENDAR\r\n"


def _filled(recurring: list[tuple[str, str | None, int]]) -> list[tuple[str, str | None, int]]:
    """`recurring`, then one-off events up to MAX_EVENTS."""
    one_offs = [((date(2030, 1, 1) + timedelta(days=n)).strftime("%Y%m%d"), None, 1)
                for n in range(MAX_EVENTS - len(recurring))]
    return recurring + one_offs


def _most_within_budget(rule: str, days_choices: range, count: int = MAX_RULES) -> list[tuple[str, str | None, int]]:
    """`count` events with `rule` (fewer if even the shortest are over budget), each as long as the step budget
    allows all of them to be: the most steps a year that many such rules can take."""
    parsed = Rule.parse(rule)
    for most in range(count, 0, -1):
        fitting = [d for d in days_choices if most * parsed.cost(d) <= EXPANSION_STEPS]
        if fitting:
            return [("20200101", rule, max(fitting))] * most
    return []


def cases() -> list[tuple[str, str, list[str]]]:
    """(name, iCalendar text, explicit dates)."""
    daily = [("20200101", "FREQ=DAILY", d) for d in (135, 135)]  # 500 + 500 steps
    weekly = _most_within_budget("FREQ=WEEKLY;BYDAY=MO,WE,FR", range(1, 367))
    monthly = _most_within_budget("FREQ=MONTHLY;BYDAY=-1FR,1MO;BYSETPOS=1,-1", range(1, 367))
    yearly = _most_within_budget("FREQ=YEARLY;BYWEEKNO=1,20,-1;BYDAY=MO,SU;WKST=SU", range(1, 367))
    counted = [("20200101", "FREQ=MONTHLY;COUNT=1000", 1)] * (COUNT_STEPS // 1000)  # 1,000 months each
    return [
        ("baseline: US holidays (11 yearly rules)", ics(US_HOLIDAYS), []),
        ("bound: 2 daily rules", ics(_filled(daily)), EXPLICIT),
        (f"bound: {len(weekly)} weekly rules", ics(_filled(weekly)), EXPLICIT),
        (f"bound: {len(monthly)} monthly rules, BYSETPOS", ics(_filled(monthly)), EXPLICIT),
        (f"bound: {len(yearly)} yearly rules, BYWEEKNO", ics(_filled(yearly)), EXPLICIT),
        (f"bound: {len(counted)} COUNT=1000 monthly rules", ics(_filled(counted)), EXPLICIT),
    ]


# As the release before the bounds stored them (no `bounds` mark): refused by a PUT now.
OLD_FORMS = [
    ("issue: DTSTART 9999-12-31 + P2D", {"dates": [], "events": [{"start": "9999-12-31", "days": 2}]}),
    ("issue: 2,000 impossible weekly RRULEs", {"dates": [], "events": [
        {"start": "2026-01-01", "days": 1, "rrules": ["FREQ=WEEKLY;BYMONTH=2;BYMONTHDAY=30"] * 2000}]}),
    ("issue: 100 impossible daily RRULEs", {"dates": [], "events": [
        {"start": "2026-01-01", "days": 1, "rrules": ["FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30"]}] * 100}),
    ("issue: DTSTART year 1, daily", {"dates": [], "events": [
        {"start": "0001-01-01", "days": 1, "rrules": ["FREQ=DAILY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO"]}]}),
]


def _cpu_ms(work: Callable[[], object]) -> float:
    best = None
    for _ in range(REPEATS):
        started = time.process_time()
        work()
        took = time.process_time() - started
        best = took if best is None else min(best, took)
    return (best or 0.0) * 1000


def _upload(name: str, ical: str, dates: list[str]) -> dict[str, Any]:
    row = compiled_row(name, dates, ical, NOW)
    Calendar.from_json(name, row.compiled).within(NOW.date()).upcoming(NOW.date(), UPCOMING, UPCOMING_YEARS)
    return row.compiled


def _poller(name: str, compiled: dict[str, Any]) -> Calendar:
    calendar = calendar_of(TENANT, name, compiled)
    calendar.excludes(NOW.date())
    calendar.excludes(NOW.date().replace(year=NOW.year + 1))
    return calendar


def _preview(name: str, compiled: dict[str, Any]) -> None:
    calendars = [calendar_of(TENANT, f"{name}-{n}", compiled).within(NOW.date()) for n in range(10)]
    ExcludingSchedule(parse_schedule("0 0 9 1 6 *", "UTC"), calendars, "next_day").slots(NOW, 100)


def _old_form(compiled: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in compiled.items() if key != "bounds"}


def run() -> list[tuple[str, ...]]:
    rows = []
    for name, ical, dates in cases():
        compiled = _upload("c", ical, dates)
        steps = _poller("c", compiled).steps
        rows.append((name, f"{len(compiled['events'])}", f"{sum(len(e.get('rrules', ())) for e in compiled['events'])}",
                     f"{steps}", f"{_cpu_ms(lambda: _upload('c', ical, dates)):.1f}",
                     f"{_cpu_ms(lambda: _poller('c', compiled)):.1f}",
                     f"{_cpu_ms(lambda: _poller('c', _old_form(compiled))):.1f}",
                     f"{_cpu_ms(lambda: _preview('c', compiled)):.1f}"))
    for name, compiled in OLD_FORMS:
        calendar = _poller("c", compiled)
        rows.append((name, f"{len(compiled['events'])}", f"{sum(len(e.get('rrules', ())) for e in compiled['events'])}",
                     f"{calendar.steps}", "400", "", f"{_cpu_ms(lambda: _poller('c', compiled)):.1f}",
                     f"{_cpu_ms(lambda: _preview('c', compiled)):.1f}"))
    return rows


def main() -> None:
    logging.disable(logging.WARNING)  # the old forms' warnings, one per read
    print(f"CPU ms per calendar (best of {REPEATS}, process time); steps: the poller's first two years")
    header = ("calendar", "events", "rules", "steps", "upload", "poller", "old form", "preview x10")
    rows = run()
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))


if __name__ == "__main__":
    main()
