"""The bounds of what a calendar holds (tickwork.calendars.bounds): every date inside 1970-01-01..2200-12-31,
at most 10 RRULEs an event and 100 a calendar, no rule that can never match, their cost a year within the
expansion's step budget. A PUT's iCalendar text past them is a 400 naming `ical` and the event, never quoting
the text; a compiled calendar stored before them (by an older release) is read with what is past them left
out, each named in its warnings, and never raises."""
from __future__ import annotations

from datetime import date

import pytest

from tickwork.calendars.bounds import COUNT_STEPS, EXPANSION_STEPS, LAST_DATE, MAX_RULES, MAX_RULES_PER_EVENT
from tickwork.calendars.ical import parse_ical
from tickwork.calendars.rules import Calendar, Event
from tickwork.errors import InvalidInputError


def ics(*events: str) -> str:
    body = "".join(f"BEGIN:VEVENT\r\nUID:{n}\r\n{e.strip()}\r\nSUMMARY:secret party\r\nEND:VEVENT\r\n"
                   for n, e in enumerate(events))
    return f"BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//tests//EN\r\n{body}END:VCALENDAR\r\n"


CHRISTMAS = "DTSTART;VALUE=DATE:20201225\r\nRRULE:FREQ=YEARLY"
IMPOSSIBLE_WEEKLY = "RRULE:FREQ=WEEKLY;BYMONTH=2;BYMONTHDAY=30"


def refusal(*events: str) -> str:
    with pytest.raises(InvalidInputError) as caught:
        parse_ical(ics(*events))
    assert caught.value.field == "ical" and "secret" not in caught.value.message
    return caught.value.message


@pytest.mark.parametrize(("event", "message"), [
    # The issue's session: a date at the end of datetime's range, two days long.
    ("DTSTART;VALUE=DATE:99991231\r\nDURATION:P2D", "event 2: DTSTART outside 1970-01-01..2200-12-31"),
    ("DTSTART;VALUE=DATE:00010101\r\nRRULE:FREQ=YEARLY", "event 2: DTSTART outside 1970-01-01..2200-12-31"),
    ("DTSTART;VALUE=DATE:19691231", "event 2: DTSTART outside 1970-01-01..2200-12-31"),
    ("DTSTART;VALUE=DATE:22001231\r\nDURATION:P2D", "event 2: DTEND or DURATION reaches past 2200-12-31"),
    ("DTSTART;VALUE=DATE:22001230\r\nDTEND;VALUE=DATE:22010102", "event 2: DTEND or DURATION reaches past 2200-12-31"),
    ("DTSTART;VALUE=DATE:20260101\r\nRDATE;VALUE=DATE:99990101", "event 2: RDATE outside 1970-01-01..2200-12-31"),
    ("DTSTART;VALUE=DATE:20260101\r\nDURATION:P3D\r\nRDATE;VALUE=DATE:22001230",
     "event 2: RDATE outside 1970-01-01..2200-12-31"),
    ("DTSTART;VALUE=DATE:20260101\r\nEXDATE;VALUE=DATE:00050101", "event 2: EXDATE outside 1970-01-01..2200-12-31"),
    ("DTSTART;VALUE=DATE:20260101\r\nRRULE:FREQ=DAILY;UNTIL=99991231",
     "event 2: RRULE UNTIL outside 1970-01-01..2200-12-31"),
    ("DTSTART;VALUE=DATE:20260101\r\nRRULE:FREQ=YEARLY;BYEASTER=0", "event 2: RRULE may have only FREQ, UNTIL"),
    ("DTSTART;VALUE=DATE:20260101\r\nRRULE:FREQ=YEARLY;COUNT=2;UNTIL=20300101",
     "event 2: RRULE cannot have both COUNT and UNTIL"),
    ("DTSTART;VALUE=DATE:20260101\r\nRRULE:FREQ=MONTHLY;BYDAY=54MO", "event 2: RRULE BYDAY's number"),
    # (dateutil fails with an IndexError walking these, having given nothing)
    ("DTSTART;VALUE=DATE:20260101\r\nRRULE:FREQ=MONTHLY;BYDAY=2SU,6FR",
     "event 2: RRULE BYDAY's number of a weekday in a month must be in 1-5"),
    ("DTSTART;VALUE=DATE:20260101\r\nRRULE:FREQ=YEARLY;BYMONTH=12;BYDAY=-9MO",
     "event 2: RRULE BYDAY's number of a weekday in a month must be in 1-5"),
])
def test_a_date_or_rule_out_of_bounds_is_a_400_naming_ical_and_the_event(event: str, message: str) -> None:
    assert refusal(CHRISTMAS, event).startswith(message)


@pytest.mark.parametrize("rule", [
    IMPOSSIBLE_WEEKLY,  # the issue's: dateutil walked it to the year 9999
    "RRULE:FREQ=YEARLY;BYMONTH=4;BYMONTHDAY=31",
    "RRULE:FREQ=DAILY;BYMONTH=2;BYYEARDAY=61,100",  # day 61 is 1 or 2 March
    "RRULE:FREQ=MONTHLY;BYMONTH=2;BYMONTHDAY=-30",
    "RRULE:FREQ=YEARLY;BYWEEKNO=20;BYMONTH=1",
    "RRULE:FREQ=MONTHLY;BYDAY=1MO;BYMONTHDAY=15",  # the first Monday is one of days 1-7
    "RRULE:FREQ=YEARLY;BYMONTH=2",  # from a start on the 30th: dateutil reads BYMONTHDAY=30
    "RRULE:FREQ=WEEKLY;BYSETPOS=8",
    "RRULE:FREQ=YEARLY;BYYEARDAY=366;BYMONTHDAY=30",  # day 366 is 31 December
])
def test_a_rule_that_can_never_match_is_refused(rule: str) -> None:
    message = refusal(CHRISTMAS, f"DTSTART;VALUE=DATE:20260130\r\n{rule}")
    assert message.startswith("event 2: RRULE") and ("never matches" in message or "BYSETPOS" in message)


@pytest.mark.parametrize("rule", [
    "RRULE:FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29",  # leap years
    "RRULE:FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO",  # 29 February on a Monday: 2044, 2072
    "RRULE:FREQ=YEARLY;BYYEARDAY=366",
    "RRULE:FREQ=YEARLY;BYWEEKNO=53;BYMONTH=1",  # 1-3 January can be the last week of the year before
    "RRULE:FREQ=YEARLY;BYWEEKNO=1;BYMONTH=12",  # 29-31 December can be week 1 of the next
    "RRULE:FREQ=MONTHLY;BYDAY=5MO;BYMONTH=2",
    "RRULE:FREQ=YEARLY;BYDAY=53FR",
    "RRULE:FREQ=MONTHLY;BYDAY=-1FR;BYMONTHDAY=-7,-6,-5,-4,-3,-2,-1",
])
def test_a_rare_rule_that_can_match_is_kept(rule: str) -> None:
    assert parse_ical(ics(f"DTSTART;VALUE=DATE:20260101\r\n{rule}"))[0].rrules


def test_at_most_10_rrules_an_event_the_issues_2000_lines_included() -> None:
    rules = "\r\n".join([IMPOSSIBLE_WEEKLY] * 2000)
    assert refusal(f"DTSTART;VALUE=DATE:20260101\r\n{rules}") == "event 1: at most 10 RRULEs an event, got 2000"
    ten = "\r\n".join(f"RRULE:FREQ=YEARLY;BYMONTH={m}" for m in range(1, MAX_RULES_PER_EVENT + 1))
    assert len(parse_ical(ics(f"DTSTART;VALUE=DATE:20260101\r\n{ten}"))[0].rrules) == MAX_RULES_PER_EVENT
    eleven = ten + "\r\nRRULE:FREQ=YEARLY;BYMONTH=11"
    assert refusal(f"DTSTART;VALUE=DATE:20260101\r\n{eleven}") == "event 1: at most 10 RRULEs an event, got 11"


def test_rules_cost_a_year_at_most_the_expansion_budget_together() -> None:
    # A daily rule of an event of d days walks 365 + d days a year (tickwork.calendars.recurrence.Rule.cost).
    at_budget = [f"DTSTART;VALUE=DATE:20200101\r\nDURATION:P{d}D\r\nRRULE:FREQ=DAILY" for d in (135, 135)]
    assert 365 * 2 + 135 + 135 == EXPANSION_STEPS
    assert len(parse_ical(ics(*at_budget))) == 2
    over = at_budget[:1] + ["DTSTART;VALUE=DATE:20200101\r\nDURATION:P136D\r\nRRULE:FREQ=DAILY"]
    assert refusal(*over).startswith(f"event 2: its RRULEs would take more than {EXPANSION_STEPS} steps")
    sparse = [f"DTSTART;VALUE=DATE:20200101\r\nRRULE:FREQ=DAILY;INTERVAL={k}" for k in (1, 2, 3, 4, 5, 6)]
    assert len(parse_ical(ics(*sparse))) == 6  # 366 + 183 + 123 + 92 + 74 + 62 steps


def test_a_count_rule_is_kept_as_until_its_last_date_with_the_same_dates() -> None:
    event, = parse_ical(ics("DTSTART;VALUE=DATE:20260105\r\nRRULE:FREQ=WEEKLY;BYDAY=MO,FR;COUNT=5"))
    assert event.rrules == ("FREQ=WEEKLY;BYDAY=MO,FR;UNTIL=20260119",)
    calendar = Calendar("c", frozenset(), (event,))
    assert calendar.upcoming(date(2026, 1, 1), 10, years=5) == [
        date(2026, 1, 5), date(2026, 1, 9), date(2026, 1, 12), date(2026, 1, 16), date(2026, 1, 19)]
    past_the_bounds, = parse_ical(ics("DTSTART;VALUE=DATE:20260101\r\nRRULE:FREQ=YEARLY;COUNT=1000"))
    assert past_the_bounds.rrules == ("FREQ=YEARLY",)  # the same dates up to 2200 as without an end


def test_count_rules_find_their_last_dates_within_a_step_budget() -> None:
    each = "DTSTART;VALUE=DATE:20200101\r\nRRULE:FREQ=MONTHLY;COUNT=1000"  # 1,000 months walked
    assert len(parse_ical(ics(*[each] * (COUNT_STEPS // 1000)))) == COUNT_STEPS // 1000
    message = refusal(*[each] * (COUNT_STEPS // 1000 + 1))
    assert message.startswith(f"event {COUNT_STEPS // 1000 + 1}: its RRULE with COUNT takes more than")


# ---------------------------------------------------------------- stored by an older release

def stored(*events: dict[str, object], dates: tuple[str, ...] = ()) -> Calendar:
    """A compiled form as the release before these bounds wrote it (no `bounds` mark), read back."""
    return Calendar.from_json("hol", {"dates": list(dates), "events": list(events)})


def test_a_stored_calendar_out_of_bounds_is_read_with_those_parts_left_out_and_named() -> None:
    calendar = stored(
        {"start": "9999-12-31", "days": 2},  # the issue's session
        {"start": "0001-01-01", "days": 1, "rrules": ["FREQ=DAILY"]},
        {"start": "2026-01-01", "days": 1, "rrules": ["FREQ=WEEKLY;BYMONTH=2;BYMONTHDAY=30"] * 2000},
        {"start": "2020-12-25", "days": 1, "rrules": ["FREQ=YEARLY"], "rdates": ["9999-01-01", "2026-07-04"],
         "exdates": ["0001-01-01"]},
        dates=("2026-05-01", "9999-01-01"),
    )
    assert calendar.warnings == [
        "dates.1: must be from 1970-01-01 to 2200-12-31; left out",
        "event 1: DTSTART outside 1970-01-01..2200-12-31; left out",
        "event 2: DTSTART outside 1970-01-01..2200-12-31; left out",
        "event 3: at most 10 RRULEs an event, got 2000; left out",
    ] + ["event 3: RRULE never matches: no date has the month, day of the month, day of the year, week and "
         "weekday position it asks for; left out"] * 10 + [
        "event 4: RDATE outside 1970-01-01..2200-12-31; left out",
        "event 4: EXDATE outside 1970-01-01..2200-12-31; left out",
    ]
    assert [day for day in (date(2026, 5, 1), date(2026, 1, 1), date(2026, 7, 4), date(2026, 12, 25), date(2026, 6, 1))
            if calendar.excludes(day)] == [date(2026, 5, 1), date(2026, 1, 1), date(2026, 7, 4), date(2026, 12, 25)]
    assert calendar.upcoming(date(2199, 12, 1), 3, years=5) == [date(2199, 12, 25), date(2200, 12, 25)]
    assert not calendar.excludes(date(2201, 12, 25))  # past the bounds a calendar excludes nothing


def test_a_calendar_written_now_is_read_back_as_written_without_warnings() -> None:
    events = parse_ical(ics(CHRISTMAS, "DTSTART;VALUE=DATE:20260105\r\nRRULE:FREQ=WEEKLY;COUNT=3"))
    written = Calendar("hol", frozenset({date(2026, 5, 1)}), events).to_json()
    again = Calendar.from_json("hol", written)
    assert (again.dates, again.events, again.warnings) == (frozenset({date(2026, 5, 1)}), events, [])


def test_a_stored_calendar_over_the_rule_limits_keeps_the_first_rules_within_them() -> None:
    yearly = {"start": "2020-01-01", "days": 1, "rrules": [f"FREQ=YEARLY;BYMONTHDAY={d}" for d in range(1, 31)]}
    calendar = stored(*[yearly] * 4)  # 120 rules: events 1-3 hold 10 each (the rest left out), event 4 none
    kept = [len(event.rrules) for event in calendar.events]
    assert kept == [MAX_RULES_PER_EVENT] * 4 and sum(kept) <= MAX_RULES
    daily = {"start": "2020-01-01", "days": 366, "rrules": ["FREQ=DAILY"]}  # 731 steps a year
    over_budget = stored(daily, daily)
    assert [len(event.rrules) for event in over_budget.events] == [1, 0]
    assert over_budget.warnings[0].startswith(f"event 2: its RRULEs would take more than {EXPANSION_STEPS} steps")


def test_a_stored_event_that_cannot_be_read_is_left_out_not_raised() -> None:
    calendar = stored({"start": "not a date"}, {"days": 1}, {"start": "2026-01-02", "days": "x"}, "20260101",  # type: ignore[arg-type]
                      {"start": "2026-01-03", "days": 1, "rrules": ["FREQ=HOURLY"]}, dates=("2026-02-30",))
    assert calendar.warnings == ["dates.0: not a date; left out"] + [
        f"event {n}: not a readable event; left out" for n in (1, 2, 3, 4)] + [
        "event 5: RRULE FREQ must be DAILY, WEEKLY, MONTHLY or YEARLY; left out"]
    assert calendar.excludes(date(2026, 1, 3)) and calendar.events == (Event(date(2026, 1, 3)),)
    assert LAST_DATE.year == 2200
