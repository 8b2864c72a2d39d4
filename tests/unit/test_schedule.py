"""Cron schedules: parsing, validation, time zones and the exact DST rules of docs/schedules.md."""
from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from tickwork.errors import ScheduleError
from tickwork.schedule import Schedule, from_spec, parse_schedule

NY = ZoneInfo("America/New_York")
LONDON = ZoneInfo("Europe/London")
SYDNEY = ZoneInfo("Australia/Sydney")


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def local(tz: ZoneInfo, *args: int, fold: int = 0) -> datetime:
    """A wall time in `tz` as a UTC instant: aware datetimes on ambiguous wall times never compare equal."""
    return datetime(*args, tzinfo=tz, fold=fold).astimezone(UTC)


def fires(expression: str, tz: str, after: datetime, count: int) -> list[datetime]:
    return parse_schedule(expression, tz).preview(after, count)


def test_five_field_cron_fires_every_minute_in_utc() -> None:
    assert fires("* * * * *", "UTC", utc(2026, 1, 1, 0, 0, 30), 2) == [utc(2026, 1, 1, 0, 1), utc(2026, 1, 1, 0, 2)]


def test_six_field_cron_takes_seconds_first() -> None:
    assert fires("*/2 * * * * *", "UTC", utc(2026, 1, 1, 0, 0, 59), 2) == [utc(2026, 1, 1, 0, 1, 0), utc(2026, 1, 1, 0, 1, 2)]
    assert fires("15 30 9 * * *", "UTC", utc(2026, 1, 1), 1) == [utc(2026, 1, 1, 9, 30, 15)]


def test_next_after_is_strictly_after() -> None:
    schedule = parse_schedule("0 30 9 * * *", "UTC")
    assert schedule.next_after(utc(2026, 1, 1, 9, 30)) == utc(2026, 1, 2, 9, 30)
    assert schedule.next_after(utc(2026, 1, 1, 9, 29, 59, 999999)) == utc(2026, 1, 1, 9, 30)


def test_next_after_ms_agrees_with_next_after() -> None:
    schedule = parse_schedule("*/5 * * * * *", "UTC")
    after = utc(2026, 1, 1, 0, 0, 4)
    expected = schedule.next_after(after)
    assert expected is not None
    assert schedule.next_after_ms(int(after.timestamp() * 1000) + 999) == int(expected.timestamp() * 1000)


def test_canonical_is_six_fields_seconds_first() -> None:
    assert parse_schedule("30  9 * * mon-fri").canonical == "0 30 9 * * MON-FRI"
    assert parse_schedule("*/2 * * * * *").canonical == "*/2 * * * * *"


def test_wall_time_is_read_in_the_job_zone() -> None:
    assert fires("0 9 * * *", "Europe/London", utc(2026, 7, 1), 1) == [utc(2026, 7, 1, 8)]
    assert fires("0 9 * * *", "Europe/London", utc(2026, 1, 1), 1) == [utc(2026, 1, 1, 9)]


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("* * * *", "got 4"),
        ("* * * * * * * *", "got 8"),
        ("61 * * * *", "61"),
        ("*/0 * * * *", "0"),
        ("* * * * FOO", "FOO"),
        ("0 0 30 2 *", "never fires"),
        ("", "empty"),
    ],
)
def test_invalid_cron_is_rejected_with_the_reason(expression: str, fragment: str) -> None:
    with pytest.raises(ScheduleError) as info:
        parse_schedule(expression)
    assert info.value.field == "schedule"
    assert fragment.lower() in info.value.message.lower()


def test_unknown_zone_names_the_timezone_field() -> None:
    with pytest.raises(ScheduleError) as info:
        parse_schedule("* * * * *", "Mars/Base")
    assert info.value.field == "timezone"
    assert info.value.message == "unknown time zone 'Mars/Base'"


def test_spec_round_trips_and_is_cached() -> None:
    schedule = parse_schedule("0 30 9 * * MON-FRI", "Europe/London", start_at=utc(2026, 1, 1))
    rebuilt = from_spec(schedule.spec())
    assert isinstance(rebuilt, Schedule)
    assert rebuilt.canonical == schedule.canonical
    assert rebuilt.timezone == "Europe/London"
    assert rebuilt.spec() == schedule.spec()
    assert from_spec(schedule.spec()) is rebuilt


# --- DST: America/New_York springs forward 2026-03-08 02:00 -> 03:00, falls back 2026-11-01 02:00 -> 01:00.


def test_nonexistent_fixed_time_fires_once_at_the_end_of_the_gap() -> None:
    assert fires("30 2 * * *", "America/New_York", local(NY, 2026, 3, 7, 12), 2) == [
        local(NY, 2026, 3, 8, 3),
        local(NY, 2026, 3, 9, 2, 30),
    ]


def test_several_nonexistent_times_collapse_into_one_run() -> None:
    assert fires("*/15 2 * * *", "America/New_York", local(NY, 2026, 3, 7, 3), 2) == [
        local(NY, 2026, 3, 8, 3),
        local(NY, 2026, 3, 9, 2),
    ]


def test_periodic_hour_skips_the_gap_keeping_real_elapsed_time() -> None:
    assert fires("30 * * * *", "America/New_York", local(NY, 2026, 3, 8, 1), 2) == [
        local(NY, 2026, 3, 8, 1, 30),
        local(NY, 2026, 3, 8, 3, 30),
    ]


def test_ambiguous_fixed_time_fires_once_at_the_first_occurrence() -> None:
    assert fires("30 1 * * *", "America/New_York", local(NY, 2026, 10, 31, 12), 2) == [
        local(NY, 2026, 11, 1, 1, 30),
        local(NY, 2026, 11, 2, 1, 30),
    ]


def test_periodic_hour_runs_through_the_repeated_hour() -> None:
    assert fires("0 * * * *", "America/New_York", local(NY, 2026, 11, 1, 0, 30), 3) == [
        utc(2026, 11, 1, 5),
        utc(2026, 11, 1, 6),
        utc(2026, 11, 1, 7),
    ]


def test_periodic_hour_from_inside_the_first_pass_goes_to_the_second_pass() -> None:
    schedule = parse_schedule("10 * * * *", "America/New_York")
    assert schedule.next_after(local(NY, 2026, 11, 1, 1, 50)) == local(NY, 2026, 11, 1, 1, 10, fold=1)
    assert schedule.next_after(local(NY, 2026, 11, 1, 1, 50, fold=1)) == local(NY, 2026, 11, 1, 2, 10)


def test_fixed_time_from_inside_the_second_pass_does_not_repeat() -> None:
    schedule = parse_schedule("*/20 1 * * *", "America/New_York")
    assert schedule.next_after(local(NY, 2026, 11, 1, 1, 5, fold=1)) == local(NY, 2026, 11, 2, 1)
