"""Catch-up decisions after an outage, pinned to explicit instants."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from tickwork.rules.policy import LATENESS_TOLERANCE_MS, MAX_COUNTED_MISSES, SlotPlan, plan_slot
from tickwork.schedule.engine import Schedule, parse_schedule
from tickwork.timeutil import from_ms, to_ms

T0 = to_ms(datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc))
MINUTE = 60_000
EVERY_MINUTE = parse_schedule("* * * * *", "UTC")
FIVE_MINUTES = 5 * MINUTE


def test_on_time_slot_fires_and_moves_to_the_following_one() -> None:
    assert plan_slot(EVERY_MINUTE, T0, T0 + 40, FIVE_MINUTES, "latest") == SlotPlan(T0, None, 0, T0 + MINUTE)


def test_lookahead_claim_of_a_future_slot_fires_it() -> None:
    assert plan_slot(EVERY_MINUTE, T0, T0 - 800, 0, "latest") == SlotPlan(T0, None, 0, T0 + MINUTE)


def test_a_slightly_late_tick_is_late_not_missed_even_with_a_zero_window() -> None:
    assert plan_slot(EVERY_MINUTE, T0, T0 + LATENESS_TOLERANCE_MS - 1, 0, "latest").fire_ms == T0


def test_two_hour_stop_fires_only_the_latest_slot_in_the_window_and_records_the_rest_missed() -> None:
    now = T0 + 120 * MINUTE + 30_000  # 12:00 was due; stopped until 14:00:30
    plan = plan_slot(EVERY_MINUTE, T0, now, FIVE_MINUTES, "latest")
    assert plan == SlotPlan(T0 + 120 * MINUTE, T0, 120, T0 + 121 * MINUTE)


def test_two_hour_stop_with_no_slot_inside_the_window_fires_nothing() -> None:
    hourly = parse_schedule("0 * * * *", "UTC")
    now = T0 + 150 * MINUTE  # slots 12:00, 13:00, 14:00 all older than 5 minutes at 14:30
    assert plan_slot(hourly, T0, now, FIVE_MINUTES, "latest") == SlotPlan(None, T0, 3, T0 + 180 * MINUTE)


def test_catchup_all_records_the_old_gap_then_fires_each_slot_inside_the_window() -> None:
    now = T0 + 120 * MINUTE + 30_000
    first = plan_slot(EVERY_MINUTE, T0, now, FIVE_MINUTES, "all")
    assert first == SlotPlan(None, T0, 116, T0 + 116 * MINUTE)
    fired = []
    slot = first.next_ms
    while slot is not None and slot <= now:
        plan = plan_slot(EVERY_MINUTE, slot, now, FIVE_MINUTES, "all")
        fired.append(plan.fire_ms)
        slot = plan.next_ms
    assert fired == [T0 + m * MINUTE for m in range(116, 121)]
    assert slot == T0 + 121 * MINUTE


def test_short_delay_within_the_window_catches_up_once() -> None:
    every_10s = parse_schedule("*/10 * * * * *", "UTC")
    plan = plan_slot(every_10s, T0, T0 + 35_000, FIVE_MINUTES, "latest")
    assert plan == SlotPlan(T0 + 30_000, T0, 3, T0 + 40_000)


def test_a_one_time_schedule_past_its_window_is_missed_and_ends() -> None:
    once = parse_schedule("at(2026-11-30T12:00:00)", "UTC")
    assert plan_slot(once, T0, T0 + 3600_000, FIVE_MINUTES, "latest") == SlotPlan(None, T0, 1, None)


class CountingSchedule:
    """A schedule that counts the work asked of it: each next_after_ms is one step of the schedule."""

    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule
        self.steps = 0

    def next_after_ms(self, after_ms: int) -> int | None:
        self.steps += 1
        return self.schedule.next_after_ms(after_ms)

    def period_ms(self, from_ms: int, to_ms: int) -> int | None:
        return self.schedule.period_ms(from_ms, to_ms)


def _walked_plan(schedule: Schedule, slot_ms: int, now_ms: int, window_ms: int, catchup: str) -> SlotPlan:
    """The plan as the rule reads, found by walking every slot: the reference for small outages."""
    oldest = now_ms - max(window_ms, LATENESS_TOLERANCE_MS)
    slots, current = [], schedule.next_after_ms(slot_ms - 1)
    while current is not None and current <= now_ms:
        slots.append(current)
        current = schedule.next_after_ms(current)
    inside = [s for s in slots if s >= oldest]
    if slots == [slot_ms] and slot_ms >= oldest or catchup == "all" and slot_ms >= oldest:
        return SlotPlan(slot_ms, None, 0, schedule.next_after_ms(slot_ms))
    if catchup == "all":
        stop = inside[0] if inside else current
        return _capped(schedule, stop, SlotPlan(None, slot_ms, len(slots) - len(inside), stop))
    if not inside:
        return _capped(schedule, current, SlotPlan(None, slot_ms, len(slots), current))
    missed = len(slots) - 1
    return _capped(schedule, inside[-1], SlotPlan(inside[-1], slot_ms if missed else None, missed, current))


def _capped(schedule: Schedule, stop: int | None, plan: SlotPlan) -> SlotPlan:
    """A count up to a slot over a fixed period is exact; any other stops at the cap."""
    if plan.missed_count <= MAX_COUNTED_MISSES or stop is not None and schedule.period_ms(plan.missed_from_ms or 0, stop):
        return plan
    return SlotPlan(plan.fire_ms, plan.missed_from_ms, MAX_COUNTED_MISSES, plan.next_ms, True)


@pytest.mark.parametrize("expression, zone, start", [
    ("rate(7 seconds)", "UTC", None),
    ("rate(1 minute)", "UTC", datetime(2026, 11, 30, 11, 0, 13, 250000, tzinfo=timezone.utc)),
    ("*/5 * * * * *", "UTC", None),
    ("*/10 * * * * *", "Europe/Paris", None),
    ("0 */15 * * * *", "America/New_York", None),
    ("0 30 9 * * MON-FRI", "America/New_York", None),
])
@pytest.mark.parametrize("gap_ms", [0, 3_000, 61_000, 40 * MINUTE + 1, 5 * 3600_000])
@pytest.mark.parametrize("catchup", ["latest", "all"])
def test_counting_in_steps_or_by_arithmetic_agrees_with_walking_every_slot(
    expression: str, zone: str, start: datetime | None, gap_ms: int, catchup: str,
) -> None:
    schedule = parse_schedule(expression, zone, start_at=start, anchor=start)
    slot = schedule.next_after_ms(T0 - 1)
    assert slot is not None
    ending = parse_schedule(expression, zone, start_at=start, anchor=start, end_at=from_ms(slot + 20 * MINUTE + 1))
    now = slot + gap_ms
    for each in (schedule, ending):
        assert plan_slot(each, slot, now, FIVE_MINUTES, catchup) == _walked_plan(each, slot, now, FIVE_MINUTES, catchup)


def test_a_rate_job_behind_by_hours_or_days_is_planned_in_a_few_steps_of_its_schedule() -> None:
    every_second = parse_schedule("rate(1 second)", "UTC")
    steps = []
    for gap_ms in (3 * 3600_000, 7 * 86400_000):
        for catchup in ("latest", "all"):
            counting = CountingSchedule(every_second)
            plan = plan_slot(counting, T0, T0 + gap_ms, FIVE_MINUTES, catchup)
            assert plan.missed_count == gap_ms // 1000 - (300 if catchup == "all" else 0)
            assert not plan.missed_at_least
            steps.append(counting.steps)
    assert max(steps) <= 4  # the same few steps, whatever the outage: O(1)


def test_a_schedule_without_a_period_counts_up_to_a_cap_and_says_at_least() -> None:
    every_second_from_8_to_20 = parse_schedule("* * 8-20 * * *", "Europe/Paris")  # not a plain period
    counting = CountingSchedule(every_second_from_8_to_20)
    plan = plan_slot(counting, T0, T0 + 3 * 3600_000, FIVE_MINUTES, "latest")
    assert plan.fire_ms == T0 + 3 * 3600_000 and plan.next_ms == T0 + 3 * 3600_000 + 1000
    assert plan.missed_count == MAX_COUNTED_MISSES and plan.missed_at_least
    # The count's walk, plus a binary search for the latest slot of the window instead of its 300 steps.
    assert counting.steps <= MAX_COUNTED_MISSES + 64


@pytest.mark.parametrize("expression, zone, slot, now", [
    # Paris falls back at 01:00 UTC, New York springs forward at 07:00 UTC: the gap spans the change.
    ("*/10 * * * * *", "Europe/Paris", datetime(2026, 10, 25, 0, 50, tzinfo=timezone.utc),
     datetime(2026, 10, 25, 1, 10, 5, tzinfo=timezone.utc)),
    ("0 */15 * * * *", "America/New_York", datetime(2026, 3, 8, 5, 0, tzinfo=timezone.utc),
     datetime(2026, 3, 8, 9, 0, 5, tzinfo=timezone.utc)),
])
@pytest.mark.parametrize("catchup", ["latest", "all"])
def test_a_gap_across_a_dst_change_is_counted_slot_by_slot(
    expression: str, zone: str, slot: datetime, now: datetime, catchup: str,
) -> None:
    schedule = parse_schedule(expression, zone)
    assert schedule.period_ms(to_ms(slot), to_ms(now)) is None
    assert schedule.period_ms(to_ms(slot), to_ms(slot) + 60_000) is not None
    planned = plan_slot(schedule, to_ms(slot), to_ms(now), FIVE_MINUTES, catchup)
    assert planned == _walked_plan(schedule, to_ms(slot), to_ms(now), FIVE_MINUTES, catchup)


def test_a_rate_or_a_plain_cron_period_has_a_fixed_period_while_the_offset_holds() -> None:
    assert parse_schedule("rate(5 minutes)", "Europe/Paris").period_ms(T0, T0 + 86400_000 * 200) == 300_000
    assert parse_schedule("*/5 * * * * *", "UTC").period_ms(T0, T0 + 86400_000 * 30) == 5_000
    assert parse_schedule("0 0 */6 * * *", "Etc/UTC").period_ms(T0, T0 + 3600_000) == 6 * 3600_000
    assert parse_schedule("*/5 * * * * *", "Europe/Paris").period_ms(T0, T0 + 3600_000) == 5_000
    assert parse_schedule("0 30 9 * * *", "UTC").period_ms(T0, T0 + 3600_000) is None
