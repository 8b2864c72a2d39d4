"""Reading a calendar's iCalendar text: all-day events (one day, several, recurring) and the 400s for what
is not one, naming `ical` and saying why without quoting the text."""
from __future__ import annotations

from datetime import date

import pytest

from tickwork.calendars.bounds import EXPANSION_STEPS
from tickwork.calendars.ical import MAX_EVENT_DAYS, parse_ical
from tickwork.calendars.recurrence import Rule
from tickwork.calendars.rules import Calendar, Event, excluded_by
from tickwork.calendars.walk import StepBudget
from tickwork.errors import InvalidInputError


def ics(*events: str) -> str:
    body = "".join(f"BEGIN:VEVENT\r\nUID:{n}\r\n{e.strip()}\r\nEND:VEVENT\r\n" for n, e in enumerate(events))
    return f"BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//tests//EN\r\n{body}END:VCALENDAR\r\n"


CHRISTMAS = "DTSTART;VALUE=DATE:20201225\r\nDTEND;VALUE=DATE:20201226\r\nRRULE:FREQ=YEARLY\r\nSUMMARY:Christmas"


def excluded(text: str, *days: date) -> list[date]:
    calendar = Calendar("c", frozenset(), parse_ical(text))
    return [day for day in days if calendar.excludes(day)]


def test_a_yearly_rule_excludes_the_date_every_year_from_its_start() -> None:
    days = [date(2019, 12, 25), date(2020, 12, 25), date(2026, 12, 25), date(2099, 12, 25), date(2026, 12, 24)]
    assert excluded(ics(CHRISTMAS), *days) == [date(2020, 12, 25), date(2026, 12, 25), date(2099, 12, 25)]


def test_an_exdate_takes_one_occurrence_out_and_an_rdate_adds_one() -> None:
    text = ics(CHRISTMAS + "\r\nEXDATE;VALUE=DATE:20261225\r\nRDATE;VALUE=DATE:20260704")
    assert excluded(text, date(2025, 12, 25), date(2026, 12, 25), date(2027, 12, 25), date(2026, 7, 4)) == [
        date(2025, 12, 25), date(2027, 12, 25), date(2026, 7, 4)]


def test_a_multi_day_event_covers_dtstart_up_to_not_including_dtend_across_a_year_end() -> None:
    text = ics("DTSTART;VALUE=DATE:20261228\r\nDTEND;VALUE=DATE:20270102\r\nSUMMARY:Shutdown")
    days = [date(2026, 12, 27), date(2026, 12, 28), date(2026, 12, 31), date(2027, 1, 1), date(2027, 1, 2)]
    assert excluded(text, *days) == [date(2026, 12, 28), date(2026, 12, 31), date(2027, 1, 1)]


def test_a_recurring_multi_day_event_begun_the_year_before_still_covers_january() -> None:
    text = ics("DTSTART;VALUE=DATE:20201231\r\nDURATION:P3D\r\nRRULE:FREQ=YEARLY")
    assert excluded(text, date(2027, 1, 1), date(2027, 1, 2), date(2027, 1, 3), date(2026, 12, 31)) == [
        date(2027, 1, 1), date(2027, 1, 2), date(2026, 12, 31)]


def test_a_rule_by_weekday_thanksgiving() -> None:
    text = ics("DTSTART;VALUE=DATE:20201126\r\nRRULE:FREQ=YEARLY;BYMONTH=11;BYDAY=4TH")
    assert excluded(text, date(2026, 11, 26), date(2027, 11, 25), date(2027, 11, 26)) == [
        date(2026, 11, 26), date(2027, 11, 25)]


def test_without_dtend_an_all_day_event_is_one_day() -> None:
    assert parse_ical(ics("DTSTART;VALUE=DATE:20260101")) == (Event(date(2026, 1, 1), 1),)


def test_the_compiled_form_round_trips() -> None:
    calendar = Calendar("c", frozenset({date(2026, 5, 1)}), parse_ical(ics(CHRISTMAS + "\r\nEXDATE;VALUE=DATE:20261225")))
    again = Calendar.from_json("c", calendar.to_json())
    assert (again.dates, again.events) == (calendar.dates, calendar.events)
    assert excluded_by([again], date(2027, 12, 25)) == "c" and excluded_by([again], date(2026, 12, 25)) is None


@pytest.mark.parametrize(("text", "message"), [
    ("not a calendar", "not an iCalendar file"),
    ("BEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20260101\r\nEND:VEVENT\r\n", "not an iCalendar file"),
    (ics("DTSTART:20261228T100000Z\r\nSUMMARY:secret meeting"), "event 1: not an all-day event"),
    (ics(CHRISTMAS, "DTSTART;VALUE=DATE:2026"), "event 2: DTSTART is not a valid value"),
    (ics("SUMMARY:no start"), "event 1: has no DTSTART"),
    (ics("DTSTART;VALUE=DATE:20260101\r\nRRULE:FREQ=HOURLY"), "RRULE FREQ must be DAILY, WEEKLY, MONTHLY or YEARLY"),
    (ics("DTSTART;VALUE=DATE:20260101\r\nRRULE:FREQ=YEARLY;BYMONTH=13"), "RRULE BYMONTH must be in 1-12"),
    (ics("DTSTART;VALUE=DATE:20260101\r\nRRULE:FREQ=YEARLY;INTERVAL=0"), "RRULE INTERVAL must be in 1-1000"),
    (ics("DTSTART;VALUE=DATE:20260101\r\nRRULE:FREQ=YEARLY;BYDAY=XX"), "event 1: RRULE is not a valid value"),
    (ics("DTSTART;VALUE=DATE:20260101\r\nRRULE:FREQ=DAILY;BYHOUR=9"), "cannot name hours"),
    (ics("DTSTART;VALUE=DATE:20260101\r\nDTEND;VALUE=DATE:20260101"), f"must cover 1 to {MAX_EVENT_DAYS} days"),
    (ics("DTSTART;VALUE=DATE:20260101\r\nDURATION:PT12H"), "DURATION must be whole days"),
    (ics("DTSTART;VALUE=DATE:20260101\r\nEXDATE:20260101T090000Z"), "EXDATE must list dates"),
])
def test_what_is_not_an_all_day_calendar_is_a_400_naming_ical(text: str, message: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        parse_ical(text)
    assert caught.value.field == "ical" and message in caught.value.message
    assert "secret meeting" not in caught.value.message and "not a calendar" not in caught.value.message


def test_at_most_100_rrules_a_calendar_counted_by_rule_not_by_event() -> None:
    with pytest.raises(InvalidInputError) as caught:
        parse_ical(ics(*["DTSTART;VALUE=DATE:20200101\r\nRRULE:FREQ=YEARLY"] * 101))
    assert caught.value.field == "ical" and caught.value.message == "event 101: at most 100 RRULEs a calendar"
    two_each = "DTSTART;VALUE=DATE:20200101\r\nRRULE:FREQ=YEARLY\r\nRRULE:FREQ=YEARLY;BYMONTH=6"
    assert len(parse_ical(ics(*[two_each] * 50))) == 50
    with pytest.raises(InvalidInputError) as caught:
        parse_ical(ics(*[two_each] * 51))
    assert caught.value.message == "event 51: at most 100 RRULEs a calendar"


@pytest.mark.parametrize("seed", range(4))
def test_a_rule_that_starts_counting_later_gives_the_dates_a_full_walk_gives(seed: int) -> None:
    from datetime import datetime, timedelta
    import random

    from dateutil import rrule

    rng = random.Random(seed)
    for _ in range(50):
        frequency = rng.choice(["DAILY", "WEEKLY", "MONTHLY", "YEARLY"])
        extra = rng.choice(["", ";BYDAY=MO,FR", ";BYDAY=-1FR", ";UNTIL=20400101", ";BYMONTH=3,9"])
        text = f"FREQ={frequency};INTERVAL={rng.randint(1, 5)}{extra}"
        start = date(rng.randint(1990, 2020), rng.randint(1, 12), rng.randint(1, 28))
        event, year = Event(start, rng.randint(1, 3), (text,)), rng.randint(2021, 2045)
        budget = StepBudget(EXPANSION_STEPS)
        walk = rrule.rruleset()
        walk.rdate(datetime.combine(start, datetime.min.time()))
        walk.rrule(rrule.rrulestr(text, dtstart=datetime.combine(start, datetime.min.time())))
        expected = {m.date() + timedelta(days=n) for m in walk.between(datetime(year - 1, 12, 20), datetime(year, 12, 31), inc=True)
                    for n in range(event.days)}
        assert set(event.dates_in(year, budget)) == {d for d in expected if d.year == year}, (text, start, year)
        assert budget.used <= Rule.parse(text).cost(event.days)
