"""Catch-up decisions after an outage, pinned to explicit instants."""
from __future__ import annotations

from datetime import datetime, timezone

from tickwork.rules.policy import LATENESS_TOLERANCE_MS, SlotPlan, plan_slot
from tickwork.schedule.engine import parse_schedule
from tickwork.timeutil import to_ms

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
