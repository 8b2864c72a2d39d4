"""A calendar's next excluded dates (`Calendar.upcoming`): explicit dates and expanded events merged in order,
from a given date on, its events looked for a bounded number of years ahead."""
from __future__ import annotations

from datetime import date

from tickwork.calendars.ical import parse_ical
from tickwork.calendars.rules import Calendar

CHRISTMAS = ("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//tests//EN\r\nBEGIN:VEVENT\r\nUID:x\r\n"
             "DTSTART;VALUE=DATE:20201225\r\nRRULE:FREQ=YEARLY\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n")
ONCE = ("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//tests//EN\r\nBEGIN:VEVENT\r\nUID:y\r\n"
        "DTSTART;VALUE=DATE:20260101\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n")


def test_explicit_dates_and_a_yearly_event_merge_in_order_from_the_day_given_on() -> None:
    calendar = Calendar("c", frozenset({date(2026, 7, 4), date(2027, 1, 1), date(2025, 1, 1)}), parse_ical(CHRISTMAS))
    assert calendar.upcoming(date(2026, 7, 4), 4, years=5) == [
        date(2026, 7, 4), date(2026, 12, 25), date(2027, 1, 1), date(2027, 12, 25)]


def test_a_yearly_event_gives_one_date_a_year_up_to_the_count() -> None:
    calendar = Calendar("c", frozenset(), parse_ical(CHRISTMAS))
    assert calendar.upcoming(date(2026, 12, 26), 3, years=5) == [
        date(2027, 12, 25), date(2028, 12, 25), date(2029, 12, 25)]


def test_events_are_looked_for_only_so_many_years_ahead_but_every_explicit_date_counts() -> None:
    calendar = Calendar("c", frozenset({date(2999, 1, 1)}), parse_ical(CHRISTMAS))
    assert calendar.upcoming(date(2026, 1, 1), 10, years=2) == [
        date(2026, 12, 25), date(2027, 12, 25), date(2999, 1, 1)]


def test_past_dates_and_events_that_ended_leave_nothing() -> None:
    calendar = Calendar("c", frozenset({date(2025, 12, 31)}), parse_ical(ONCE))
    assert calendar.upcoming(date(2026, 1, 2), 10, years=5) == []
    assert calendar.upcoming(date(2026, 1, 1), 10, years=5) == [date(2026, 1, 1)]
