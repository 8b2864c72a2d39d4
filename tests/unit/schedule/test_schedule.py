"""Cron schedules: parsing, validation, time zones and the exact DST rules of docs/schedules.md."""
from __future__ import annotations

import json
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from tickwork.errors import ScheduleError
from tickwork.schedule.cron import parse_cron
from tickwork.schedule.engine import Schedule, from_spec, parse_schedule

NY = ZoneInfo("America/New_York")
LONDON = ZoneInfo("Europe/London")
SYDNEY = ZoneInfo("Australia/Sydney")


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def local(tz: ZoneInfo, year: int, month: int, day: int, hour: int = 0, minute: int = 0, *, fold: int = 0) -> datetime:
    """A wall time in `tz` as a UTC instant: aware datetimes on ambiguous wall times never compare equal."""
    return datetime(year, month, day, hour, minute, tzinfo=tz, fold=fold).astimezone(UTC)


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
    assert schedule.next_after(datetime(2026, 1, 1, 9, 29, 59, 999999, tzinfo=UTC)) == utc(2026, 1, 1, 9, 30)


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
    ("expression", "message"),
    [
        ("* * * *", "cron needs 5 fields (minute hour day-of-month month day-of-week) or 6 (second first), got 4"),
        ("* * * * * * *", "cron needs 5 fields (minute hour day-of-month month day-of-week) or 6 (second first), got 7"),
        ("61 * * * *", "minute field: a value is out of range 0-59"),
        ("60 * * * * *", "second field: a value is out of range 0-59"),
        ("* 24 * * *", "hour field: a value is out of range 0-23"),
        ("* * 0 * *", "day-of-month field: a value is out of range 1-31"),
        ("* * * 13 *", "month field: a value is out of range 1-12"),
        ("* * * * 8", "day-of-week field: a value is out of range 0-7"),
        ("*/0 * * * *", "minute field: a step must be at least 1"),
        ("* 1-5/0 * * *", "hour field: a step must be at least 1"),
        ("* * * * FOO", "day-of-week field: unknown name; use SUN-SAT or 0-7"),
        ("* * * JANUARY *", "month field: unknown name; use JAN-DEC or 1-12"),
        ("* * * * MON#6", "day-of-week field: the week number after # must be 1-5"),
        ("* * 5-1 * *", "day-of-month field: a range is reversed"),
        ("1,,2 * * * *", "minute field: empty item in a list"),
        ("* ? * * *", "hour field: ? is only allowed alone, in day-of-month or day-of-week"),
        ("0 0 30 2 *", "schedule never fires"),
        ("0 0 31 4,6,9,11 *", "schedule never fires"),
        ("   ", "schedule is empty"),
        ("rate(0 minutes)", "rate() interval must be at least 1"),
        ("rate(5 fortnights)", "rate() needs a whole number and a unit (seconds, minutes, hours or days), "
                               "e.g. rate(30 seconds)"),
        ("at(tomorrow)", "at() needs a local date and time, e.g. at(2026-12-24T18:00:00)"),
        ("at(2026-12-24T18:00:00Z)", "at() takes a wall-clock time without an offset; the job's timezone applies"),
        ("* * * * 1-5x", "day-of-week field: a value is not a number"),
        ("*/x * * * *", "minute field: a step must be a whole number"),
        ("at(9999-12-31T23:59:59)", "at() must be in the years 1970 to 8999"),
        ("at(1969-12-31T23:59:59)", "at() must be in the years 1970 to 8999"),
    ],
)
def test_invalid_schedule_is_rejected_saying_why(expression: str, message: str) -> None:
    with pytest.raises(ScheduleError) as info:
        parse_schedule(expression)
    assert (info.value.field, info.value.message) == ("schedule", message)


@pytest.mark.parametrize("expression", [
    "¹ * * * *",  # superscript one: isdigit() but not int()
    "٣ * * * *",  # Arabic-Indic three: int() reads it as 3
    "0 ９ * * *",  # fullwidth nine
    "* * * * ＭＯＮ",
    "*/٥ * * * *",
    "* * * * MON#２",
    "rate(٥ minutes)",
    "every ٥ minutes",
    "every day at ٩:٣٠",
    "at(２０２６-12-24T18:00:00)",
    "once at 2026-12-24 １8:00",
])
def test_schedules_take_ascii_digits_and_names_only(expression: str) -> None:
    with pytest.raises(ScheduleError) as info:
        parse_schedule(expression)
    assert info.value.field == "schedule"
    assert "ASCII" in info.value.message


def test_a_digit_int_cannot_read_is_a_schedule_error_not_a_crash() -> None:
    with pytest.raises(ScheduleError, match="minute field: a value is not a number"):
        parse_cron("¹ * * * *")


def test_a_schedule_stored_with_other_digits_before_the_ascii_rule_still_runs() -> None:
    stored = {"expression": "٣ * * * *", "canonical": "0 ٣ * * * *", "timezone": "UTC"}
    assert from_spec(stored).next_after(utc(2026, 1, 1)) == utc(2026, 1, 1, 0, 3)


def test_unicode_spaces_between_fields_are_still_spaces() -> None:
    assert parse_schedule("0\u00a09 * * *").canonical == "0 0 9 * * *"


def test_no_rule_reaches_past_the_last_supported_instant() -> None:
    last = datetime(9000, 1, 1, tzinfo=UTC)
    yearly = parse_schedule("0 0 0 1 1 *")
    assert yearly.next_after(utc(8998, 6, 1)) == utc(8999, 1, 1)
    assert yearly.next_after(utc(8999, 6, 1)) is None
    behind_utc = parse_schedule("0 0 0 1 1 *", "Etc/GMT+12").preview(utc(8990, 1, 1), 20)
    assert [run.year for run in behind_utc] == list(range(8990, 9000))
    decade = parse_schedule("rate(3650 days)").preview(utc(8960, 1, 1), 10)
    assert 0 < len(decade) < 10 and decade[-1] < last


def test_unknown_zone_names_the_timezone_field() -> None:
    for name in ("Mars/Base", "", "../../etc/passwd"):
        with pytest.raises(ScheduleError) as info:
            parse_schedule("* * * * *", name)
        assert (info.value.field, info.value.message) == ("timezone", "unknown time zone; use an IANA name like Europe/Paris")


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("*/10 * * * * *", "interval of 10s is below the minimum of 30s"),
        ("0,15 * * * * *", "interval of 15s is below the minimum of 30s"),
        ("59,0 * * * * *", "interval of 1s is below the minimum of 30s"),
        ("rate(10 seconds)", "interval of 10s is below the minimum of 30s"),
        ("every 20 seconds", "interval of 20s is below the minimum of 30s"),
    ],
)
def test_interval_below_the_minimum_is_rejected(expression: str, message: str) -> None:
    with pytest.raises(ScheduleError) as info:
        parse_schedule(expression, min_interval_seconds=30)
    assert info.value.message == message


def test_intervals_at_the_minimum_are_accepted() -> None:
    for expression in ("*/30 * * * * *", "0,30 * * * * *", "rate(30 seconds)", "* * * * *", "0 59 23 * * *"):
        parse_schedule(expression, min_interval_seconds=30)
    with pytest.raises(ScheduleError, match="interval of 60s is below the minimum of 120s"):
        parse_schedule("* * * * *", min_interval_seconds=120)


def test_at_in_the_past_is_rejected_and_now_is_used_for_nothing_else() -> None:
    with pytest.raises(ScheduleError) as info:
        parse_schedule("at(2026-01-01T00:00:00)", now=utc(2026, 6, 1))
    assert info.value.message == "at() time is in the past"
    with pytest.raises(ScheduleError, match="in the past"):
        parse_schedule("at(2026-06-01T02:00:00)", "Europe/Berlin", now=utc(2026, 6, 1, 0))
    future = parse_schedule("at(2026-06-01T02:00:01)", "Europe/Berlin", now=utc(2026, 6, 1, 0))
    assert future.next_after(utc(2026, 6, 1)) == utc(2026, 6, 1, 0, 0, 1)
    assert parse_schedule("* * * * *", now=utc(2030, 1, 1)).next_after(utc(2026, 1, 1)) == utc(2026, 1, 1, 0, 1)


def test_window_fields_are_checked() -> None:
    with pytest.raises(ScheduleError) as info:
        parse_schedule("* * * * *", start_at=datetime(2026, 1, 1))
    assert (info.value.field, info.value.message) == ("start_at", "start_at must include a UTC offset")
    with pytest.raises(ScheduleError) as info:
        parse_schedule("* * * * *", start_at=utc(2026, 1, 2), end_at=utc(2026, 1, 1))
    assert (info.value.field, info.value.message) == ("end_at", "end_at must be after start_at")
    with pytest.raises(ScheduleError) as info:
        parse_schedule("0 0 1 1 *", start_at=utc(2026, 1, 2), end_at=utc(2026, 12, 31))
    assert (info.value.field, info.value.message) == ("end_at", "schedule never fires between start_at and end_at")
    with pytest.raises(ScheduleError, match="never fires between"):
        parse_schedule("at(2026-12-24T18:00:00)", end_at=utc(2026, 12, 24, 18))


def test_no_runs_outside_start_and_end() -> None:
    schedule = parse_schedule("0 * * * *", start_at=utc(2026, 1, 1, 10, 30), end_at=utc(2026, 1, 1, 13))
    assert schedule.preview(utc(2026, 1, 1), 10) == [utc(2026, 1, 1, 11), utc(2026, 1, 1, 12)]
    assert schedule.next_after(utc(2026, 1, 1, 12)) is None
    on_the_edge = parse_schedule("0 * * * *", start_at=utc(2026, 1, 1, 11), end_at=utc(2026, 1, 1, 12))
    assert on_the_edge.preview(utc(2026, 1, 1), 10) == [utc(2026, 1, 1, 11)]


def test_at_runs_once_then_is_done() -> None:
    schedule = parse_schedule("at(2026-12-24T18:00:00)", "Europe/London")
    assert schedule.preview(utc(2026, 1, 1), 3) == [utc(2026, 12, 24, 18)]
    assert schedule.next_after(utc(2026, 12, 24, 18)) is None


def test_rate_is_anchored_and_never_drifts() -> None:
    anchor = utc(2026, 1, 1, 0, 0, 7)
    schedule = parse_schedule("rate(30 seconds)", anchor=anchor)
    assert schedule.next_after(utc(2026, 1, 1, 0, 0, 7)) == utc(2026, 1, 1, 0, 0, 37)
    # However late the previous run finished, the next one stays on the anchor's grid.
    assert schedule.next_after(datetime(2026, 1, 1, 5, 0, 36, 999000, tzinfo=UTC)) == utc(2026, 1, 1, 5, 0, 37)
    assert schedule.next_after(utc(2025, 12, 31, 23, 59, 59)) == utc(2026, 1, 1, 0, 0, 7)


def test_rate_anchor_defaults_to_start_at_then_to_the_epoch() -> None:
    start = utc(2026, 1, 1, 0, 0, 7)
    assert parse_schedule("rate(1 minute)", start_at=start).preview(utc(2025, 1, 1), 2) == [
        start, utc(2026, 1, 1, 0, 1, 7)
    ]
    assert parse_schedule("rate(1 minute)").next_after(utc(2026, 1, 1, 0, 0, 7)) == utc(2026, 1, 1, 0, 1)


@pytest.mark.parametrize(
    "expression",
    ["30 9 * * mon-fri", "every 5 minutes", "rate(90 seconds)", "at(2026-12-24T18:00)", "every day at 9am", "@hourly"],
)
def test_spec_round_trips_through_json_and_is_cached(expression: str) -> None:
    schedule = parse_schedule(
        expression, "Europe/London", anchor=utc(2026, 1, 1, 0, 0, 3), start_at=utc(2026, 1, 1), end_at=utc(2027, 1, 1)
    )
    spec = json.loads(json.dumps(schedule.spec()))
    rebuilt = from_spec(spec)
    assert isinstance(rebuilt, Schedule)
    assert (rebuilt.expression, rebuilt.canonical, rebuilt.timezone) == (expression, schedule.canonical, "Europe/London")
    assert rebuilt.spec() == schedule.spec()
    assert rebuilt.preview(utc(2026, 3, 1), 3) == schedule.preview(utc(2026, 3, 1), 3)
    assert from_spec(dict(spec)) is rebuilt


def test_spec_keeps_the_anchor_only_for_rates() -> None:
    assert parse_schedule("rate(1 hour)", anchor=utc(2026, 1, 1)).spec()["anchor_ms"] == 1767225600000
    assert parse_schedule("0 * * * *", anchor=utc(2026, 1, 1)).spec()["anchor_ms"] is None


def test_from_spec_without_a_canonical_expression_is_a_schedule_error() -> None:
    with pytest.raises(ScheduleError):
        from_spec({"timezone": "UTC"})


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
