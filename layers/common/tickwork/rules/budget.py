"""A tenant's runs in flight (quota max_runs_in_flight), decided without I/O: how long a dispatched attempt
holds its place at most, when a run held back is looked at again, what it says meanwhile, and when one held
back too long is recorded missed by its job's catch-up policy (tickwork.rules.policy) instead of firing late.
"""
from __future__ import annotations

from dataclasses import dataclass

from tickwork.rules.policy import LATENESS_TOLERANCE_MS
from tickwork.vocab import Catchup

# A run held back is dispatched again this soon at first: a place freed by a run that just ended is used
# within a tick or two...
DELAY_MS = 1_000
# ...and, held longer, after a quarter of the time it has waited, at most this long: a tenant with thousands
# of runs held back costs the poller, which every tenant shares, a few hundred looks a second, not thousands.
MAX_DELAY_MS = 10_000


@dataclass(frozen=True)
class HeldBack:
    """A first run of a schedule slot that the budget held back before, as its job's catch-up policy sees it."""

    scheduled_for_ms: int
    catchup: str
    catchup_window_seconds: int
    superseded: bool  # a later slot of its job is recorded (not missed)


def lapse_ms(fire_at_ms: int, now_ms: int, max_request_timeout_seconds: int, lost_margin_seconds: int) -> int:
    """When a dispatched attempt's place lapses if its executor never gives it back: the longest request
    after its instant plus the margin after which the sweeper also takes it for lost."""
    return max(fire_at_ms, now_ms) + (max_request_timeout_seconds + lost_margin_seconds) * 1000


def delay_ms(delayed_at_ms: int | None, now_ms: int) -> int:
    """How long until a run held back (again) is looked at again; `delayed_at_ms`: when it first was."""
    waited = 0 if delayed_at_ms is None else now_ms - delayed_at_ms
    return min(MAX_DELAY_MS, max(DELAY_MS, waited // 4))


def looked_at_again_ms(fire_at_ms: int, delayed_at_ms: int | None, now_ms: int) -> int:
    """When a run held back (again) goes back in the due index: after delay_ms, and never before its instant
    (a run handed over ahead of it, or a replay waiting for its pace, is then dispatched as due at it)."""
    return max(fire_at_ms, now_ms + delay_ms(delayed_at_ms, now_ms))


def delay_note(in_flight: int, budget: int) -> str:
    return f"delayed: tenant has {in_flight} runs in flight (max_runs_in_flight {budget})"


def missed_note(held: HeldBack, now_ms: int) -> str | None:
    """Why a run held back must not fire any more, as a slot its job's catch-up policy skips; None if it may."""
    window_ms = max(held.catchup_window_seconds * 1000, LATENESS_TOLERANCE_MS)
    if now_ms - held.scheduled_for_ms > window_ms:
        return (f"missed: held back by the tenant's max_runs_in_flight past the job's catch-up window "
                f"({held.catchup_window_seconds} s)")
    if held.catchup == Catchup.LATEST and held.superseded:
        return ("missed: held back by the tenant's max_runs_in_flight until a later slot of the job came due "
                "(catch-up latest runs only the latest)")
    return None
