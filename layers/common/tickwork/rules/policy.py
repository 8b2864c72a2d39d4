"""Per-job run policies, decided without I/O: what a claimed slot turns into after an outage.

Catch-up: a slot older than the job's catch-up window is recorded `missed` instead of fired. With
catch-up `latest` (the default) a job that fell behind fires at most once, for its latest slot still
inside the window, and every slot it skipped over is recorded missed in one row; with `all` it fires
every slot still inside the window, one per claim. Either way the job then continues with its
schedule, and no slot silently disappears.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from tickwork import defaults
from tickwork.vocab import Catchup

DEFAULT_CATCHUP = defaults.CATCHUP
DEFAULT_CATCHUP_WINDOW_SECONDS = defaults.CATCHUP_WINDOW_SECONDS
# The most slots a catch-up window may span: what the API's longest window (a week) holds of a
# per-minute job. A sub-minute schedule gets that many of its own slots' worth (every second: 2 h 48 min),
# not a week: `catchup: all` would replay 604,800 runs of an every-second job after a week's outage.
MAX_CATCHUP_SLOTS = 10_080
DEFAULT_OVERLAP = defaults.OVERLAP
# A slot this late is only late, never missed, whatever the window: a slow tick is not an outage.
LATENESS_TOLERANCE_MS = 5_000
# Counting the missed slots of a schedule without a fixed period over the gap (a cron list, or a gap
# across a DST change) walks it, about 0.6 us a slot: past this many the count is recorded as a lower
# bound ("at least"), so one claim costs under a millisecond whatever the outage.
MAX_COUNTED_MISSES = 1_000


class Schedule(Protocol):
    def next_after_ms(self, after_ms: int) -> int | None: ...

    def period_ms(self, from_ms: int, to_ms: int) -> int | None: ...


@dataclass(frozen=True)
class SlotPlan:
    fire_ms: int | None  # the slot to run now, if any
    missed_from_ms: int | None  # first slot recorded missed (one row stands for the whole gap)
    missed_count: int
    next_ms: int | None  # the job's new score; None when the schedule has no more runs
    missed_at_least: bool = False  # the count stopped at MAX_COUNTED_MISSES: at least that many were missed


def plan_slot(schedule: Schedule, slot_ms: int, now_ms: int, window_ms: int, catchup: str) -> SlotPlan:
    """Decide what claiming `slot_ms` at `now_ms` means for a job."""
    oldest_allowed = now_ms - max(window_ms, LATENESS_TOLERANCE_MS)
    following = schedule.next_after_ms(slot_ms)
    if slot_ms >= oldest_allowed and (following is None or following > now_ms or catchup == Catchup.ALL):
        return SlotPlan(slot_ms, None, 0, following)  # the normal case: not behind
    first_in_window = slot_ms if slot_ms >= oldest_allowed else schedule.next_after_ms(oldest_allowed - 1)
    if catchup == Catchup.ALL:
        return _missed(schedule, slot_ms, first_in_window, None, first_in_window)
    latest = _latest_until(schedule, first_in_window, now_ms)
    if latest is None:
        upcoming = schedule.next_after_ms(now_ms)
        return _missed(schedule, slot_ms, upcoming, None, upcoming)
    return _missed(schedule, slot_ms, latest, latest, schedule.next_after_ms(latest))


def _missed(schedule: Schedule, slot_ms: int, stop_ms: int | None, fire_ms: int | None,
            next_ms: int | None) -> SlotPlan:
    """The plan that records the slots in [slot_ms, stop_ms) missed (one row, if any), fires `fire_ms`
    and moves the job to `next_ms`."""
    missed, at_least = _count(schedule, slot_ms, stop_ms)
    return SlotPlan(fire_ms, slot_ms if missed else None, missed, next_ms, at_least)


def max_catchup_window_seconds(min_gap_seconds: int | None) -> int | None:
    """The longest catch-up window a schedule whose runs are at least `min_gap_seconds` apart may have
    (None: no bound of its own, e.g. a one-off at())."""
    return None if min_gap_seconds is None else max(min_gap_seconds, 1) * MAX_CATCHUP_SLOTS


def _latest_until(schedule: Schedule, first_ms: int | None, now_ms: int) -> int | None:
    """The last slot in [first_ms, now_ms] (first_ms is a slot itself): arithmetic over a fixed period,
    else a binary search on next_after_ms (about 40 calls for a week), never a walk of the window."""
    if first_ms is None or first_ms > now_ms:
        return None
    period = schedule.period_ms(first_ms, now_ms)
    if period:
        candidate = first_ms + (now_ms - first_ms) // period * period
        if schedule.next_after_ms(candidate - 1) == candidate:
            return candidate  # else the schedule ended before it: search
    before, after = first_ms - 1, now_ms  # next_after_ms(before) <= now_ms < next_after_ms(after)
    while after - before > 1:
        middle = (before + after) // 2
        found = schedule.next_after_ms(middle)
        if found is not None and found <= now_ms:
            before = middle
        else:
            after = middle
    return schedule.next_after_ms(before)


def _count(schedule: Schedule, start_ms: int, stop_ms: int | None) -> tuple[int, bool]:
    """How many slots lie in [start_ms, stop_ms) (both slots themselves, or stop_ms None: to the end),
    and whether counting stopped at MAX_COUNTED_MISSES first (the count is then a lower bound)."""
    period = None if stop_ms is None else schedule.period_ms(start_ms, stop_ms)
    if period and stop_ms is not None:
        return max(0, -(-(stop_ms - start_ms) // period)), False
    count = 0
    current: int | None = start_ms
    while current is not None and (stop_ms is None or current < stop_ms):
        if count == MAX_COUNTED_MISSES:
            return count, True
        count += 1
        current = schedule.next_after_ms(current)
    return count, False
