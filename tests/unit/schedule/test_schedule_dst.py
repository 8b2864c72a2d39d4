"""The DST rules of docs/schedules.md, pinned to explicit instants in three zones (and a 30-minute one).

Expected values are UTC instants: aware datetimes on ambiguous wall times never compare equal across zones.
"""
from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from tickwork.schedule.engine import parse_schedule

NY = ZoneInfo("America/New_York")  # 2026-03-08 02:00 EST -> 03:00 EDT; 2026-11-01 02:00 EDT -> 01:00 EST
LONDON = ZoneInfo("Europe/London")  # 2026-03-29 01:00 GMT -> 02:00 BST; 2026-10-25 02:00 BST -> 01:00 GMT
SYDNEY = ZoneInfo("Australia/Sydney")  # 2026-04-05 03:00 AEDT -> 02:00 AEST; 2026-10-04 02:00 AEST -> 03:00 AEDT
LORD_HOWE = ZoneInfo("Australia/Lord_Howe")  # half-hour shifts: 2026-10-04 02:00 -> 02:30; 2026-04-05 02:00 -> 01:30


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def wall(
    tz: ZoneInfo, year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0, *, fold: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=tz, fold=fold).astimezone(UTC)


def fires(expression: str, tz: ZoneInfo, after: datetime, count: int) -> list[datetime]:
    return parse_schedule(expression, tz.key).preview(after, count)


# --- Spring forward: wall times that do not exist.

SPRING_FIXED = [
    # (zone, expression, after, expected): a fixed hour inside the gap fires once, when the gap ends.
    (NY, "30 2 * * *", utc(2026, 3, 8, 0), [utc(2026, 3, 8, 7), utc(2026, 3, 9, 6, 30)]),
    (NY, "*/15 2 * * *", utc(2026, 3, 8, 0), [utc(2026, 3, 8, 7), utc(2026, 3, 9, 6)]),
    (NY, "0 2,3 * * *", utc(2026, 3, 8, 0), [utc(2026, 3, 8, 7), utc(2026, 3, 9, 6)]),
    (LONDON, "30 1 * * *", utc(2026, 3, 28, 12), [utc(2026, 3, 29, 1), utc(2026, 3, 30, 0, 30)]),
    (LONDON, "0 0 1 * * SUN", utc(2026, 3, 28, 12), [utc(2026, 3, 29, 1), utc(2026, 4, 5, 0)]),
    (SYDNEY, "30 2 * * *", utc(2026, 10, 3, 0), [utc(2026, 10, 3, 16), utc(2026, 10, 4, 15, 30)]),
    (LORD_HOWE, "15 2 * * *", utc(2026, 10, 3, 0), [utc(2026, 10, 3, 15, 30), utc(2026, 10, 4, 15, 15)]),
]


@pytest.mark.parametrize(("tz", "expression", "after", "expected"), SPRING_FIXED)
def test_fixed_time_in_the_gap_fires_once_when_the_gap_ends(
    tz: ZoneInfo, expression: str, after: datetime, expected: list[datetime]
) -> None:
    assert fires(expression, tz, after, len(expected)) == expected


def test_gap_run_is_not_repeated_when_asked_from_the_gap_end() -> None:
    schedule = parse_schedule("*/15 2 * * *", "America/New_York")
    assert schedule.next_after(utc(2026, 3, 8, 7)) == wall(NY, 2026, 3, 9, 2)


def test_periodic_hour_skips_the_gap_in_real_time() -> None:
    # croniter 7.0 puts "0 */2 * * *" at 03:00 EDT; a stepped hour keeps its period instead.
    assert fires("0 */2 * * *", NY, wall(NY, 2026, 3, 8, 0, 30), 2) == [utc(2026, 3, 8, 8), utc(2026, 3, 8, 10)]
    assert fires("30 * * * *", NY, wall(NY, 2026, 3, 8, 1), 2) == [utc(2026, 3, 8, 6, 30), utc(2026, 3, 8, 7, 30)]
    assert fires("*/20 * * * *", NY, wall(NY, 2026, 3, 8, 1, 30), 3) == [
        utc(2026, 3, 8, 6, 40), utc(2026, 3, 8, 7), utc(2026, 3, 8, 7, 20)
    ]
    assert fires("0 * * * *", LONDON, utc(2026, 3, 29, 0, 30), 2) == [utc(2026, 3, 29, 1), utc(2026, 3, 29, 2)]


def test_every_two_seconds_runs_straight_through_the_gap() -> None:
    assert fires("*/2 * * * * *", SYDNEY, wall(SYDNEY, 2026, 10, 4, 1, 59, 57), 3) == [
        utc(2026, 10, 3, 15, 59, 58), utc(2026, 10, 3, 16), utc(2026, 10, 3, 16, 0, 2)
    ]


# --- Fall back: wall times that happen twice.

FALL_FIXED = [
    # A fixed hour fires once, in the first pass; the second pass is skipped.
    # (croniter 7.0 with aware datetimes runs these a second time: 01:30 EST after 01:30 EDT.)
    (NY, "30 1 * * *", utc(2026, 11, 1, 0), [utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)]),
    (NY, "*/20 1 * * *", utc(2026, 11, 1, 0), [utc(2026, 11, 1, 5), utc(2026, 11, 1, 5, 20), utc(2026, 11, 1, 5, 40),
                                               utc(2026, 11, 2, 6)]),
    (LONDON, "0 1 * * *", utc(2026, 10, 24, 12), [utc(2026, 10, 25, 0), utc(2026, 10, 26, 1)]),
    (SYDNEY, "30 2 * * *", utc(2026, 4, 4, 0), [utc(2026, 4, 4, 15, 30), utc(2026, 4, 5, 16, 30)]),
    (LORD_HOWE, "45 1 * * *", utc(2026, 4, 4, 0), [utc(2026, 4, 4, 14, 45), utc(2026, 4, 5, 15, 15)]),
]


@pytest.mark.parametrize(("tz", "expression", "after", "expected"), FALL_FIXED)
def test_fixed_time_in_the_repeated_hour_fires_once_in_the_first_pass(
    tz: ZoneInfo, expression: str, after: datetime, expected: list[datetime]
) -> None:
    assert fires(expression, tz, after, len(expected)) == expected


def test_fixed_time_asked_from_the_second_pass_waits_for_the_next_day() -> None:
    schedule = parse_schedule("30 1 * * *", "America/New_York")
    assert schedule.next_after(wall(NY, 2026, 11, 1, 1, 10, fold=1)) == wall(NY, 2026, 11, 2, 1, 30)


def test_periodic_hour_keeps_real_elapsed_time_through_the_repeated_hour() -> None:
    assert fires("0 * * * *", NY, wall(NY, 2026, 11, 1, 0, 30), 4) == [
        utc(2026, 11, 1, 5), utc(2026, 11, 1, 6), utc(2026, 11, 1, 7), utc(2026, 11, 1, 8)
    ]
    assert fires("*/30 * * * *", LONDON, utc(2026, 10, 25, 0, 10), 4) == [
        utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 1), utc(2026, 10, 25, 1, 30), utc(2026, 10, 25, 2)
    ]
    assert fires("0 */1 * * *", SYDNEY, wall(SYDNEY, 2026, 4, 5, 1, 30), 3) == [
        utc(2026, 4, 4, 15), utc(2026, 4, 4, 16), utc(2026, 4, 4, 17)
    ]


def test_periodic_hour_from_the_first_pass_continues_into_the_second() -> None:
    schedule = parse_schedule("10 * * * *", "America/New_York")
    assert schedule.next_after(wall(NY, 2026, 11, 1, 1, 50)) == utc(2026, 11, 1, 6, 10)
    assert schedule.next_after(wall(NY, 2026, 11, 1, 1, 50, fold=1)) == utc(2026, 11, 1, 7, 10)


def test_half_hour_repeat_from_the_first_pass_finds_the_second_pass() -> None:
    # Lord Howe repeats 01:30-02:00; from 01:58:59 (+11) the next :00-:30 minute is 01:30 (+10:30).
    schedule = parse_schedule("0 0-30 * * * *", "Australia/Lord_Howe")
    assert schedule.next_after(utc(2026, 4, 4, 14, 58, 59)) == utc(2026, 4, 4, 15)
    assert schedule.preview(utc(2026, 4, 4, 14, 28, 30), 3) == [
        utc(2026, 4, 4, 14, 29), utc(2026, 4, 4, 14, 30), utc(2026, 4, 4, 15)
    ]


def test_every_second_is_one_second_apart_across_the_fall_back() -> None:
    runs = fires("* * * * * *", NY, utc(2026, 11, 1, 5, 59, 58), 4)
    assert runs == [utc(2026, 11, 1, 5, 59, 59), utc(2026, 11, 1, 6), utc(2026, 11, 1, 6, 0, 1), utc(2026, 11, 1, 6, 0, 2)]


def test_daily_midnight_is_unaffected_by_a_two_am_change() -> None:
    assert fires("@daily", NY, utc(2026, 11, 1), 2) == [wall(NY, 2026, 11, 1), wall(NY, 2026, 11, 2)]
    assert fires("@daily", NY, utc(2026, 3, 8), 2) == [wall(NY, 2026, 3, 8), wall(NY, 2026, 3, 9)]


# --- One-time and rate schedules.


def test_at_in_the_gap_runs_when_the_gap_ends_and_in_the_repeat_runs_first() -> None:
    gap = parse_schedule("at(2026-03-08T02:30:00)", "America/New_York")
    assert gap.next_after(utc(2026, 1, 1)) == utc(2026, 3, 8, 7)
    repeated = parse_schedule("at(2026-11-01T01:30:00)", "America/New_York")
    assert repeated.next_after(utc(2026, 1, 1)) == utc(2026, 11, 1, 5, 30)


def test_rate_counts_real_elapsed_time_across_dst() -> None:
    schedule = parse_schedule("rate(1 hour)", "America/New_York", anchor=utc(2026, 11, 1, 4, 17))
    assert schedule.preview(utc(2026, 11, 1, 4, 30), 3) == [
        utc(2026, 11, 1, 5, 17), utc(2026, 11, 1, 6, 17), utc(2026, 11, 1, 7, 17)
    ]
