"""Replaying runs, decided without I/O: which runs may be sent again, which windows a batch may cover, and
when each run of a batch goes (the tenant's pace, TICKWORK_REPLAY_PER_SECOND).

A replay sends a run again as the same run (same execution row, same Tickwork-Run-Id and webhook-id), with
attempts numbered after its old ones; the job's retry policy counts the replay's attempts only, so each replay
gives the run its job's retry budget again: a run is replayed at most MAX_REPLAYS_PER_RUN times. A tenant's
replayed runs waiting for their instant of its pace are at most its quota max_replays_queued
(tickwork.tenant.quotas), counted from how far ahead the pace reaches.
"""
from __future__ import annotations

import math
from datetime import datetime, timedelta

from tickwork.vocab import RunStatus

# A run that ended without succeeding (failed, lost) is sent again; a slot that never ran (missed, skipped)
# gets its run. Succeeded runs and runs still in progress are refused (409).
REPLAYABLE = (RunStatus.FAILED, RunStatus.LOST, RunStatus.MISSED, RunStatus.SKIPPED)
DEFAULT_STATUSES = (RunStatus.FAILED, RunStatus.LOST, RunStatus.MISSED)
# One request's window: a month of history (retention keeps 30 days by default)...
MAX_WINDOW = timedelta(days=31)
# ...and at most this many runs: a week of an every-minute job (10,080) fits; more is replayed window by window.
MAX_RUNS = 10_000
# The ids an answer lists; its count is always whole.
MAX_IDS_LISTED = 1_000
# Replays of one run: each brings the job's retry budget again (at most 10 attempts), so one run is sent at most
# 60 times. A run that still fails after five replays needs its target fixed, not a sixth.
MAX_REPLAYS_PER_RUN = 5


def window_problem(since: datetime, until: datetime) -> str | None:
    """Why [since, until) cannot be replayed in one request (the fault is `until`'s); None if it can."""
    if until <= since:
        return "must be later than since"
    if until - since > MAX_WINDOW:
        return f"the window may span at most {MAX_WINDOW.days} days from since; replay a longer one in parts"
    return None


def too_many(count: int, last_slot: datetime) -> str:
    """Why a window holding more than MAX_RUNS runs to replay is refused, with where a window that fits ends."""
    return (f"the window holds more than {MAX_RUNS} runs to replay; end it at or before {last_slot.isoformat()}"
            " and replay the rest in another request")


def refusal(status: str, replay_count: int = 0) -> str | None:
    """Why a run in `status`, replayed `replay_count` times, cannot be replayed (a 409); None if it can."""
    if status in REPLAYABLE:
        return None if replay_count < MAX_REPLAYS_PER_RUN else at_limit()
    if status == RunStatus.SUCCEEDED:
        return "this run succeeded: only a failed, lost, missed or skipped run can be replayed"
    return f"this run is still in progress ({status}): only a run that has ended can be replayed"


def at_limit() -> str:
    return (f"this run was replayed {MAX_REPLAYS_PER_RUN} times already, the most one run may be: each replay "
            "gives it its job's whole retry budget again")


def waiting(pace_next_at: datetime, now: datetime, per_second: int) -> int:
    """How many replayed runs of a tenant wait for their instant: those its pace (its next free instant) reserved
    at or after `now`."""
    return max(math.floor((pace_next_at - now) / gap(per_second)), 0)


def over_quota(waiting_now: int, adding: int, limit: int, per_second: int) -> str | None:
    """Why `adding` more replays with `waiting_now` waiting go past the tenant's max_replays_queued; None if not."""
    if waiting_now + adding <= limit:
        return None
    if adding > limit:
        return (f"this tenant may have at most {limit} replayed runs waiting to be sent (max_replays_queued): "
                f"replay at most {limit} at once")
    free_in = math.ceil((waiting_now + adding - limit) / per_second)
    return (f"this tenant has {waiting_now} replayed runs waiting to be sent and may have at most {limit} "
            f"(max_replays_queued); these {adding} fit in {free_in} s, as the queue drains at {per_second} a second, "
            "or replay fewer")


# How long writing a batch may take per run (10,000 took 1.4 s on the benchmark machine): its first instant is
# that far ahead of the request, so a large batch is not late, and sent at once, by the time it is written.
LEAD_PER_RUN = timedelta(microseconds=300)


def lead(count: int) -> timedelta:
    """How far after the request a batch of `count` runs starts at the earliest (3 s for 10,000; 0.3 ms for one)."""
    return LEAD_PER_RUN * count


def gap(per_second: int) -> timedelta:
    """The time between two replayed runs of one tenant."""
    return timedelta(seconds=1 / per_second)


def instants(start: datetime, count: int, per_second: int) -> list[datetime]:
    """When each of `count` runs replayed from `start` goes, in slot order: 1/per_second apart."""
    step = gap(per_second)
    return [start + step * i for i in range(count)]


def replay_attempt(attempt: int, replay_base: int) -> int:
    """An attempt's number as the retry policy counts it: from 1 again after a replay (attempts 4, 5, 6 of a
    run replayed after 3 are the replay's 1, 2, 3)."""
    return max(attempt - replay_base, 1)


def retry_origin(slot: datetime | None, attempt_started_at: datetime | None, replayed: bool) -> datetime | None:
    """What a retry is bounded from (its job's next slot after it, tickwork.runs.bounds): the run's slot, or for
    a replayed run, sent long after its slot, when its attempt started."""
    if not replayed or attempt_started_at is None:
        return slot
    return attempt_started_at if slot is None else max(slot, attempt_started_at)
