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

CATCHUP_MODES = ("latest", "all")
DEFAULT_CATCHUP = "latest"
# Long enough to ride out a poller restart or a Redis failover, short enough that a run an hour late
# (usually worse than no run) is recorded missed instead.
DEFAULT_CATCHUP_WINDOW_SECONDS = 300
OVERLAP_MODES = ("allow", "skip", "queue_one")
DEFAULT_OVERLAP = "allow"
# A slot this late is only late, never missed, whatever the window: a slow tick is not an outage.
LATENESS_TOLERANCE_MS = 5_000
# Counting missed slots walks the schedule; past this many the count is reported as a lower bound.
MAX_COUNTED_MISSES = 10_000


class Schedule(Protocol):
    def next_after_ms(self, after_ms: int) -> int | None: ...


@dataclass(frozen=True)
class SlotPlan:
    fire_ms: int | None  # the slot to run now, if any
    missed_from_ms: int | None  # first slot recorded missed (one row stands for the whole gap)
    missed_count: int
    next_ms: int | None  # the job's new score; None when the schedule has no more runs


def plan_slot(schedule: Schedule, slot_ms: int, now_ms: int, window_ms: int, catchup: str) -> SlotPlan:
    """Decide what claiming `slot_ms` at `now_ms` means for a job."""
    oldest_allowed = now_ms - max(window_ms, LATENESS_TOLERANCE_MS)
    following = schedule.next_after_ms(slot_ms)
    if slot_ms >= oldest_allowed and (following is None or following > now_ms or catchup == "all"):
        return SlotPlan(slot_ms, None, 0, following)  # the normal case: not behind
    first_in_window = slot_ms if slot_ms >= oldest_allowed else schedule.next_after_ms(oldest_allowed - 1)
    if catchup == "all":
        return SlotPlan(None, slot_ms, _count(schedule, slot_ms, first_in_window), first_in_window)
    latest = _latest_until(schedule, first_in_window, now_ms)
    if latest is None:
        upcoming = schedule.next_after_ms(now_ms)
        return SlotPlan(None, slot_ms, _count(schedule, slot_ms, upcoming), upcoming)
    missed = _count(schedule, slot_ms, latest)
    return SlotPlan(latest, slot_ms if missed else None, missed, schedule.next_after_ms(latest))


def _latest_until(schedule: Schedule, first_ms: int | None, now_ms: int) -> int | None:
    """The last slot in [first_ms, now_ms]; walks only the catch-up window, never the whole outage."""
    latest = None
    current = first_ms
    while current is not None and current <= now_ms:
        latest = current
        current = schedule.next_after_ms(current)
    return latest


def _count(schedule: Schedule, start_ms: int, stop_ms: int | None) -> int:
    """How many slots lie in [start_ms, stop_ms) (start_ms is a slot itself)."""
    count = 0
    current: int | None = start_ms
    while current is not None and (stop_ms is None or current < stop_ms) and count < MAX_COUNTED_MISSES:
        count += 1
        current = schedule.next_after_ms(current)
    return count
