"""The poller's pure decisions: what each due entry turns into, and where a claimed job moves next."""
from __future__ import annotations

from datetime import date, datetime, timezone

from tickwork.calendars.rules import Calendar
from tickwork.dispatch.planning import plan_batch
from tickwork.dispatch.poller import TICK_OFFSET_MS, next_tick_at, tick_point
from tickwork.dueindex.entries import DueEntry
from tickwork.models import Dispatch
from tickwork.rules.policy import MAX_COUNTED_MISSES
from tickwork.schedule.engine import parse_schedule
from tickwork.schedule.specs import index_spec
from tickwork.store.executions import Slot
from tickwork.timeutil import from_ms, to_ms

T0 = to_ms(datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc))
EVERY_2S = parse_schedule("*/2 * * * * *", "UTC")
EVERY_MINUTE = parse_schedule("* * * * *", "UTC")


def test_plan_turns_a_job_entry_into_a_claim_and_a_slot() -> None:
    entry = DueEntry("j:job-1", T0, index_spec(EVERY_2S, 3))
    plan = plan_batch([entry], now_ms=T0)
    claim, slot = plan.claims[0]
    assert (claim.member, claim.expected_score, claim.new_score) == ("j:job-1", T0, T0 + 2000)
    assert slot == Slot("job-1", from_ms(T0), from_ms(T0 + 2000), 3, from_ms(T0))


def test_plan_after_an_outage_fires_the_latest_slot_and_notes_the_missed_ones() -> None:
    entry = DueEntry("j:job-1", T0, index_spec(EVERY_MINUTE, 1, catchup_window_seconds=300))
    claim, slot = plan_batch([entry], now_ms=T0 + 2 * 3600 * 1000 + 500).claims[0]
    assert claim.new_score == T0 + 121 * 60_000
    assert isinstance(slot, Slot) and slot.fire == from_ms(T0 + 120 * 60_000) and slot.missed_count == 120
    assert slot.missed_note is not None and "300 s window" in slot.missed_note


def test_plan_removes_one_shot_entries_and_dispatches_them() -> None:
    plan = plan_batch([DueEntry("e:exec-9:2", T0, None)], now_ms=T0)
    claim, target = plan.claims[0]
    assert claim.new_score is None
    assert target == Dispatch("exec-9", 2, T0)


def test_plan_sets_aside_jobs_whose_spec_is_missing_or_corrupt() -> None:
    plan = plan_batch([DueEntry("j:a", T0, None), DueEntry("j:b", T0, {"v": 1, "s": {"bogus": 1}})], now_ms=T0)
    assert plan.claims == []
    assert plan.missing_specs == ["a", "b"]


def test_one_time_schedule_leaves_the_index_after_its_run() -> None:
    once = parse_schedule("at(2026-11-30T12:00:00)", "UTC")
    plan = plan_batch([DueEntry("j:once", T0, index_spec(once, 1))], now_ms=T0)
    claim, slot = plan.claims[0]
    assert claim.new_score is None and isinstance(slot, Slot) and slot.next_run_at is None
    assert slot.fire == from_ms(T0)


def test_the_loop_waits_for_the_next_whole_second_after_the_one_it_ticked() -> None:
    # A Wait honours its Timestamp to the second: it names a whole second, after the one just ticked.
    second = T0 // 1000
    assert next_tick_at(second + 0.05, second) == "2026-11-30T12:00:01.000Z"
    assert next_tick_at(second + 0.75, second) == "2026-11-30T12:00:01.000Z"
    # A long tick ending past the next whole second, before its point: that second is ticked at once.
    assert next_tick_at(second + 1.2, second) == "2026-11-30T12:00:01.000Z"
    # ...past its point too: the tick of the following second claims what it would have.
    assert next_tick_at(second + 1.7, second) == "2026-11-30T12:00:02.000Z"


def test_a_tick_claims_as_of_half_past_the_second_it_was_invoked_in_or_as_of_now_when_later() -> None:
    second = T0 / 1000
    assert tick_point(second) == second + TICK_OFFSET_MS / 1000
    assert tick_point(second + 0.031) == second + 0.5  # the Wait ended on the second, the invoke took 31 ms
    assert tick_point(second + 0.5) == second + 0.5
    assert tick_point(second + 0.8) == second + 0.8  # late (a retry, a first tick)


def test_planning_stops_when_the_budget_runs_out_and_leaves_the_rest_unclaimed() -> None:
    entries = [DueEntry(f"j:job-{n}", T0, index_spec(EVERY_2S, 1)) for n in range(10)]
    asked = []

    def out_of_time() -> bool:  # the budget runs out once three entries are planned
        asked.append(True)
        return len(asked) >= 3

    plan = plan_batch(entries, T0, out_of_time)
    assert [claim.member for claim, _ in plan.claims] == ["j:job-0", "j:job-1", "j:job-2"]
    assert plan.unplanned == 7
    assert plan_batch(entries[:1], T0, lambda: True).unplanned == 0  # a batch always plans its first entry


def test_a_count_that_stopped_at_its_cap_is_noted_as_a_lower_bound() -> None:
    office_hours_every_second = parse_schedule("* * 8-20 * * *", "Europe/Paris")  # no period: counted slot by slot
    entry = DueEntry("j:job-1", T0, index_spec(office_hours_every_second, 1, catchup_window_seconds=300))
    _, slot = plan_batch([entry], now_ms=T0 + 3 * 3600_000 + 500).claims[0]
    assert isinstance(slot, Slot) and slot.missed_count == MAX_COUNTED_MISSES
    assert slot.missed_note is not None and slot.missed_note.startswith(f"missed at least {MAX_COUNTED_MISSES} run(s)")



def test_jobs_sharing_a_schedule_and_calendars_in_a_batch_are_each_planned_as_alone() -> None:
    # One batch plans jobs with one schedule and calendar (one ExcludingSchedule between them) at slots on
    # free and excluded dates, a day behind or on time, in both modes, beside a job naming no calendar and one
    # naming a missing one.
    daily = parse_schedule("0 9 * * *", "America/New_York")
    holidays = {("tenant-1", "holidays"): Calendar("holidays", frozenset({date(2026, 12, 25), date(2026, 12, 26)}))}
    day = 86_400_000
    christmas = to_ms(datetime(2026, 12, 25, 14, tzinfo=timezone.utc))
    eve, sunday = christmas - day, christmas + 2 * day

    def entry(n: int, score: int, mode: str | None, name: str = "holidays") -> DueEntry:
        spec = index_spec(daily, 1, tenant_id="tenant-1")
        if mode:
            spec["c"] = {"exclude": [name], "on_excluded": mode}
        return DueEntry(f"j:job-{n}", score, spec)

    entries = [entry(0, eve, "next_day"), entry(1, christmas, "next_day"), entry(2, sunday, "next_day"),
               entry(3, christmas, "skip"), entry(4, eve, "skip"), entry(5, christmas, None),
               entry(6, christmas, "next_day", "gone"), entry(7, christmas, "next_day")]
    batch = plan_batch(entries, christmas + 500, calendars=holidays).claims
    assert batch == [plan_batch([e], christmas + 500, calendars=holidays).claims[0] for e in entries]
    assert [claim.new_score for claim, _ in batch] == [
        sunday, sunday, sunday + day, christmas + day, christmas + day, christmas + day, christmas + day, sunday]
    # next_day: the Christmas slot moved away is re-aimed at the Sunday, recording nothing; skip: recorded skipped.
    assert batch[1][1] == Slot("job-1", from_ms(christmas), from_ms(sunday), 1, None)
    slot = batch[3][1]
    assert isinstance(slot, Slot) and slot.skipped_note == "skipped: 2026-12-25 is excluded by calendar holidays"
