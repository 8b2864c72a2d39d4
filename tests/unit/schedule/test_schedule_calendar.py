"""Calendar edge cases in wall time: month ends, leap days, L, LW, W, # and the Vixie day rule."""
from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tickwork.schedule.engine import parse_schedule


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def days(expression: str, after: datetime, count: int) -> list[str]:
    return [run.strftime("%Y-%m-%d %a") for run in parse_schedule(expression).preview(after, count)]


def test_day_31_skips_short_months() -> None:
    assert days("0 0 31 * *", utc(2026, 1, 31), 3) == ["2026-03-31 Tue", "2026-05-31 Sun", "2026-07-31 Fri"]


def test_leap_day_fires_only_in_leap_years() -> None:
    assert days("0 0 29 2 *", utc(2026, 1, 1), 2) == ["2028-02-29 Tue", "2032-02-29 Sun"]
    assert days("0 0 29 2 *", utc(2096, 3, 1), 1) == ["2104-02-29 Fri"]  # 2100 is not a leap year


def test_last_day_of_month() -> None:
    assert days("0 0 L * *", utc(2028, 1, 31), 3) == ["2028-02-29 Tue", "2028-03-31 Fri", "2028-04-30 Sun"]


def test_last_weekday_of_month() -> None:
    # 2026-01-31 is a Saturday, 2026-05-31 a Sunday.
    assert days("0 0 LW * *", utc(2026, 1, 1), 1) == ["2026-01-30 Fri"]
    assert days("0 0 LW * *", utc(2026, 5, 1), 1) == ["2026-05-29 Fri"]


@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        ("0 0 15W * *", utc(2026, 2, 1), "2026-02-16 Mon"),  # the 15th is a Sunday
        ("0 0 15W * *", utc(2026, 8, 1), "2026-08-14 Fri"),  # the 15th is a Saturday
        ("0 0 1W * *", utc(2026, 8, 1), "2026-08-03 Mon"),  # Saturday the 1st: never into July
        ("0 0 W31 * *", utc(2026, 5, 1), "2026-05-29 Fri"),  # Sunday the 31st: never into June
    ],
)
def test_nearest_weekday_stays_in_the_month(expression: str, after: datetime, expected: str) -> None:
    assert days(expression, after, 1) == [expected]


def test_nth_and_last_weekday_of_month() -> None:
    assert days("0 0 * * FRI#3", utc(2026, 1, 1), 2) == ["2026-01-16 Fri", "2026-02-20 Fri"]
    assert days("0 0 * * 1#5", utc(2026, 1, 1), 2) == ["2026-03-30 Mon", "2026-06-29 Mon"]
    assert days("0 0 * * 5L", utc(2026, 1, 1), 2) == ["2026-01-30 Fri", "2026-02-27 Fri"]
    assert days("0 0 * * FRIL", utc(2026, 1, 1), 1) == ["2026-01-30 Fri"]


def test_vixie_or_when_both_day_fields_are_restricted() -> None:
    assert days("0 0 13 * FRI", utc(2026, 2, 1), 4) == ["2026-02-06 Fri", "2026-02-13 Fri", "2026-02-20 Fri", "2026-02-27 Fri"]
    assert days("0 0 1 * MON", utc(2026, 5, 31), 2) == ["2026-06-01 Mon", "2026-06-08 Mon"]
    assert days("0 0 1 * MON", utc(2026, 6, 29), 2) == ["2026-07-01 Wed", "2026-07-06 Mon"]


def test_vixie_and_when_a_day_field_starts_with_a_star() -> None:
    # "*/2" starts with "*": odd days that are also Mondays, as in Vixie and Debian cron.
    assert days("0 0 */2 * MON", utc(2026, 6, 1), 3) == ["2026-06-15 Mon", "2026-06-29 Mon", "2026-07-13 Mon"]
    assert days("0 0 ? * MON", utc(2026, 6, 1), 1) == ["2026-06-08 Mon"]


def test_names_ranges_steps_and_sunday_as_seven() -> None:
    assert days("0 0 1 JAN-MAR/2 *", utc(2026, 1, 1), 2) == ["2026-03-01 Sun", "2027-01-01 Fri"]
    assert days("0 0 * * 7", utc(2026, 1, 1), 1) == ["2026-01-04 Sun"]
    assert days("0 0 * * SAT-SUN", utc(2026, 1, 1), 2) == ["2026-01-03 Sat", "2026-01-04 Sun"]
    assert days("0 0 * * fri-sun", utc(2026, 1, 1), 3) == ["2026-01-02 Fri", "2026-01-03 Sat", "2026-01-04 Sun"]


def test_seconds_ranges_and_lists() -> None:
    runs = parse_schedule("10-20/5,45 * * * * *").preview(utc(2026, 1, 1), 5)
    assert [run.second for run in runs] == [10, 15, 20, 45, 10]


def test_start_step_runs_to_the_end_of_the_field() -> None:
    runs = parse_schedule("0 50/5 * * * *").preview(utc(2026, 1, 1), 3)
    assert [(run.hour, run.minute) for run in runs] == [(0, 50), (0, 55), (1, 50)]


def test_macros() -> None:
    assert parse_schedule("@yearly").canonical == "0 0 0 1 1 *"
    assert parse_schedule("@annually").canonical == "0 0 0 1 1 *"
    assert parse_schedule("@monthly").canonical == "0 0 0 1 * *"
    assert parse_schedule("@weekly").canonical == "0 0 0 * * SUN"
    assert parse_schedule("@daily").canonical == "0 0 0 * * *"
    assert parse_schedule("@midnight").canonical == "0 0 0 * * *"
    assert parse_schedule("@HOURLY").canonical == "0 0 * * * *"
    assert days("@weekly", utc(2026, 1, 1), 1) == ["2026-01-04 Sun"]
