"""A schedule with calendars applied (tickwork.schedule.excluded): skipped slots marked, next_day slots moved
to the same wall time on the next free date (DST, month and year ends, runs of excluded dates), checked
against a brute-force oracle that maps every slot one by one."""
from __future__ import annotations

import bisect
import random
from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from tickwork.calendars.rules import Calendar, excluded_by
from tickwork.schedule.engine import parse_schedule, resolve_wall
from tickwork.schedule.excluded import MOVE_DAYS, ExcludingSchedule
from tickwork.timeutil import from_ms, to_ms

UTC = timezone.utc
NY = ZoneInfo("America/New_York")
ANCHOR = datetime(2026, 1, 1, tzinfo=UTC)


def calendar(*days: date, name: str = "holidays") -> Calendar:
    return Calendar(name, frozenset(days))


def excluding(expression: str, zone: str, on_excluded: str, *calendars: Calendar) -> ExcludingSchedule:
    return ExcludingSchedule(parse_schedule(expression, zone, anchor=ANCHOR), calendars, on_excluded)


def local(moment: datetime, zone: ZoneInfo = NY) -> str:
    return moment.astimezone(zone).strftime("%Y-%m-%d %H:%M %Z")


def test_skip_keeps_every_slot_and_marks_the_excluded_ones_with_the_first_calendar_that_excludes() -> None:
    schedule = excluding("0 9 * * *", "America/New_York", "skip", calendar(date(2026, 12, 25), name="us"),
                         calendar(date(2026, 12, 25), date(2026, 12, 26), name="office"))
    slots = schedule.slots(datetime(2026, 12, 24, tzinfo=UTC), 4)
    assert [(local(s.at), s.excluded_by, s.moved_from) for s in slots] == [
        ("2026-12-24 09:00 EST", None, None), ("2026-12-25 09:00 EST", "us", None),
        ("2026-12-26 09:00 EST", "office", None), ("2026-12-27 09:00 EST", None, None)]
    assert [local(t) for t in schedule.runs(datetime(2026, 12, 24, tzinfo=UTC), 2)] == [
        "2026-12-24 09:00 EST", "2026-12-27 09:00 EST"]


def test_next_day_moves_a_weekly_slot_past_consecutive_excluded_dates_across_the_year_end() -> None:
    schedule = excluding("0 9 * * THU", "America/New_York", "next_day",
                         calendar(date(2026, 12, 31), date(2027, 1, 1), date(2027, 1, 2)))
    slots = schedule.slots(datetime(2026, 12, 25, tzinfo=UTC), 3)
    assert [(local(s.at), s.moved_from and local(s.moved_from)) for s in slots] == [
        ("2027-01-03 09:00 EST", "2026-12-31 09:00 EST"), ("2027-01-07 09:00 EST", None),
        ("2027-01-14 09:00 EST", None)]


def test_next_day_across_a_month_end() -> None:
    schedule = excluding("0 17 L * *", "UTC", "next_day", calendar(date(2026, 4, 30)))
    assert schedule.preview(datetime(2026, 4, 1, tzinfo=UTC), 2) == [
        datetime(2026, 5, 1, 17, tzinfo=UTC), datetime(2026, 5, 31, 17, tzinfo=UTC)]


def test_a_moved_slot_on_a_regular_one_is_one_run_not_two() -> None:
    schedule = excluding("0 9 * * *", "America/New_York", "next_day", calendar(date(2026, 12, 25)))
    slots = schedule.slots(datetime(2026, 12, 24, 15, tzinfo=UTC), 3)
    assert [(local(s.at), s.moved_from and local(s.moved_from)) for s in slots] == [
        ("2026-12-26 09:00 EST", "2026-12-25 09:00 EST"), ("2026-12-27 09:00 EST", None),
        ("2026-12-28 09:00 EST", None)]


def test_a_slot_moved_onto_the_spring_forward_gap_runs_when_the_gap_ends() -> None:
    # 02:30 does not exist on 2026-03-08 in New York: the moved slot runs at 03:00 EDT, as an at() would.
    schedule = excluding("30 2 * * SAT", "America/New_York", "next_day", calendar(date(2026, 3, 7)))
    assert [local(t) for t in schedule.preview(datetime(2026, 3, 1, tzinfo=UTC), 2)] == [
        "2026-03-08 03:00 EDT", "2026-03-14 02:30 EDT"]


def test_a_slot_moved_onto_the_repeated_hour_runs_at_its_first_pass() -> None:
    schedule = excluding("30 1 * * SAT", "America/New_York", "next_day", calendar(date(2026, 10, 31)))
    [moved] = schedule.preview(datetime(2026, 10, 30, tzinfo=UTC), 1)
    assert moved.astimezone(NY).fold == 0 and local(moved) == "2026-11-01 01:30 EDT"


def test_next_day_keeps_the_wall_time_not_the_elapsed_time_across_dst() -> None:
    schedule = excluding("0 9 * * *", "America/New_York", "next_day", calendar(date(2026, 3, 7)))
    assert [local(t) for t in schedule.preview(datetime(2026, 3, 6, 15, tzinfo=UTC), 2)] == [
        "2026-03-08 09:00 EDT", "2026-03-09 09:00 EDT"]


def test_with_no_free_date_within_move_days_the_slot_stays_and_is_skipped() -> None:
    start = date(2026, 1, 1)
    everything = calendar(*(start + timedelta(days=n) for n in range(MOVE_DAYS + 10)))
    schedule = excluding("0 0 12 * * *", "UTC", "next_day", everything)
    first = schedule.next_after_ms(to_ms(datetime(2026, 1, 1, tzinfo=UTC)))
    assert first == to_ms(datetime(2026, 1, 1, 12, tzinfo=UTC)) and schedule.excluded_by(first) == "holidays"
    # Those that can move again (within MOVE_DAYS of a free date) do.
    late = schedule.next_after_ms(to_ms(datetime(2026, 12, 31, tzinfo=UTC)))
    assert schedule.excluded_by(late) is None and from_ms(late).date() == start + timedelta(days=MOVE_DAYS + 10)
    # The job page's next runs leave the skipped slots out, a date of them at a time.
    assert schedule.runs(datetime(2026, 1, 1, tzinfo=UTC), 1) == [from_ms(late)]


def test_without_calendars_or_with_skip_the_schedule_and_its_period_are_unchanged() -> None:
    base = parse_schedule("*/5 * * * * *", "UTC")
    skipping = ExcludingSchedule(base, [calendar(date(2026, 1, 1))], "skip")
    moving = ExcludingSchedule(base, [calendar(date(2026, 1, 1))], "next_day")
    t = to_ms(datetime(2026, 1, 1, tzinfo=UTC))
    assert skipping.next_after_ms(t) == base.next_after_ms(t) and skipping.period_ms(t, t + 60_000) == 5000
    assert moving.period_ms(t, t + 60_000) is None


def brute_force(schedule: ExcludingSchedule, low: int, high: int) -> list[int]:
    """Every slot of the bare schedule in [low, high), each mapped on its own: the oracle."""
    tz, found, cursor = schedule.tz, set(), low
    while (slot := schedule.base.next_after_ms(cursor)) is not None and slot < high:
        cursor = slot
        moment = from_ms(slot).astimezone(tz)
        if schedule.on_excluded == "next_day" and excluded_by(schedule.calendars, moment.date()):
            landing = moment.date() + timedelta(days=1)
            while excluded_by(schedule.calendars, landing):
                landing += timedelta(days=1)
            wall = datetime.combine(landing, moment.time().replace(microsecond=0)) - datetime(1970, 1, 1)
            found.add(resolve_wall(tz, int(wall.total_seconds())) * 1000 + slot % 1000)
        else:
            found.add(slot)
    return sorted(found)


@pytest.mark.parametrize(("expression", "zone"), [
    ("30 2 * * *", "America/New_York"), ("*/20 * * * *", "America/New_York"), ("0 9 * * MON-FRI", "Europe/London"),
    ("30 1 * * *", "America/New_York"), ("0 0 * * *", "America/Santiago"), ("rate(7 hours)", "Australia/Lord_Howe"),
])
def test_next_after_matches_the_oracle_around_random_holidays(expression: str, zone: str) -> None:
    rng = random.Random(f"{expression}{zone}")
    days: set[date] = set()
    for _ in range(25):  # around the DST changes of both hemispheres and the year end
        first = date(2026, rng.choice([3, 4, 9, 10, 11, 12]), rng.randint(1, 28))
        days.update(first + timedelta(days=n) for n in range(rng.randint(1, 3)))
    schedule = excluding(expression, zone, "next_day", calendar(*days))
    low, high = to_ms(datetime(2026, 2, 20, tzinfo=UTC)), to_ms(datetime(2027, 1, 20, tzinfo=UTC))
    expected = brute_force(schedule, low - 30 * 86_400_000, high + 30 * 86_400_000)
    for t in [rng.randint(low, high) for _ in range(300)]:
        assert schedule.next_after_ms(t) == expected[bisect.bisect_right(expected, t)], from_ms(t)


def dst_dates(zone: str, year: int) -> list[date]:
    """The dates of `year` whose noon is on another UTC offset than the noon before: the DST changes."""
    tz, found = ZoneInfo(zone), []
    day = date(year, 1, 1)
    while day.year == year:
        noon, before = datetime.combine(day, datetime.min.time().replace(hour=12), tz), day - timedelta(days=1)
        if noon.utcoffset() != datetime.combine(before, noon.time(), tz).utcoffset():
            found.append(day)
        day += timedelta(days=1)
    return found


def around(schedule: ExcludingSchedule, days: set[date], expected: list[int]) -> list[int]:
    """Instants next to every slot of the dates around `days`: each date's first instant and the one before,
    each base slot and the ms before and after it, each mapped slot and the ms before it."""
    low = to_ms(datetime.combine(min(days) - timedelta(days=2), datetime.min.time(), UTC)) - 86_400_000
    high = to_ms(datetime.combine(max(days) + timedelta(days=4), datetime.min.time(), UTC)) + 86_400_000
    near = {d + timedelta(days=n) for d in days for n in range(-2, 4)}
    points = [t for slot in expected for t in (slot - 1, slot)]
    for day in sorted(near):
        start = resolve_wall(schedule.tz, int((datetime.combine(day, datetime.min.time()) - datetime(1970, 1, 1))
                                          .total_seconds())) * 1000
        points += [start - 1, start]
        cursor = start - 1
        while (slot := schedule.base.next_after_ms(cursor)) is not None and schedule.local_date(slot) == day:
            points += [slot - 1, slot, slot + 1]
            cursor = slot
    return [t for t in points if low <= t < high]


@pytest.mark.parametrize(("expression", "zone"), [
    ("30 2 * * *", "America/New_York"), ("*/20 * * * *", "America/New_York"), ("30 1 * * *", "America/New_York"),
    ("0 0 * * *", "America/Santiago"), ("15 0 * * *", "America/Santiago"), ("0 9 * * *", "Europe/London"),
    ("rate(7 hours)", "Australia/Lord_Howe"), ("45 23 * * *", "Pacific/Chatham"),
])
def test_next_after_matches_the_oracle_next_to_excluded_dates_on_dst_changes_with_two_calendars(
        expression: str, zone: str) -> None:
    # Each DST change of 2026 and 2027 excluded, or the dates just before or after it, split between two
    # calendars: slots of yesterday's excluded date land today (the instants asked are next to them), on a
    # changed offset, in a gap or a repeated hour; runs of dates span both calendars.
    rng = random.Random(f"{expression}{zone}")
    first: set[date] = set()
    second: set[date] = set()
    patterns = [(-1,), (0,), (-1, 0), (0, 1), (-2, -1)]  # days from the change excluded
    for n, change in enumerate(dst_dates(zone, 2026) + dst_dates(zone, 2027) + [date(2026, 12, 31)]):
        for offset in patterns[n % len(patterns)]:
            rng.choice([first, second]).add(change + timedelta(days=offset))
    schedule = excluding(expression, zone, "next_day", calendar(*first, name="first"),
                         calendar(*second, name="second"))
    days = first | second
    low = to_ms(datetime.combine(min(days), datetime.min.time(), UTC)) - 40 * 86_400_000
    high = to_ms(datetime.combine(max(days), datetime.min.time(), UTC)) + 40 * 86_400_000
    expected = brute_force(schedule, low, high)
    points = around(schedule, days, expected)
    assert len(points) > 100
    for t in points:
        assert schedule.next_after_ms(t) == expected[bisect.bisect_right(expected, t)], from_ms(t)
