"""Retry policy: which failures are retried and when the next attempt is due. Pure: `now` (and, for
jitter, the random source) is passed in."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Callable

from tickwork import defaults
from tickwork.models import RetryPolicy as RetryPolicy  # the policy is a part of the typed job
from tickwork.timeutil import rfc3339
from tickwork.vocab import Jitter, RunStatus

STRATEGIES = ("exponential", "linear", "fixed")
DEFAULT_STRATEGY = defaults.RETRY_STRATEGY
DEFAULT_MAX_ATTEMPTS = defaults.RETRY_MAX_ATTEMPTS
DEFAULT_DELAY_SECONDS = defaults.RETRY_DELAY_SECONDS
# However steep the curve, a run never waits more than a day between attempts.
MAX_DELAY_SECONDS = 86_400
# 408 and 429 say "try later"; every 5xx may be transient. Other statuses are the caller's problem.
RETRYABLE_STATUS = frozenset({408, 429})
DEFAULT_JITTER = defaults.RETRY_JITTER
DEFAULT_MAX_DELAY_SECONDS = defaults.RETRY_MAX_DELAY_SECONDS
DEFAULT_PAST_NEXT_RUN = defaults.RETRY_PAST_NEXT_RUN
STORED_JITTER = defaults.STORED_RETRY_JITTER
STORED_PAST_NEXT_RUN = defaults.STORED_RETRY_PAST_NEXT_RUN

Random = Callable[[], float]  # uniform in [0, 1), as random.random


def is_retryable_status(status_code: int) -> bool:
    return status_code >= 500 or status_code in RETRYABLE_STATUS


def delay_after(policy: RetryPolicy, attempt: int) -> float:
    """Seconds to wait after failed attempt number `attempt` (1-based) before the next one."""
    if policy.strategy == "exponential":
        delay = policy.delay_seconds * (2 ** min(attempt - 1, 32))
    elif policy.strategy == "linear":
        delay = policy.delay_seconds * attempt
    else:
        delay = policy.delay_seconds
    bounded: float = min(delay, ceiling(policy))
    return bounded


def ceiling(policy: RetryPolicy) -> float:
    return min(policy.max_delay_seconds, MAX_DELAY_SECONDS)


def jittered(delay: float, jitter: str, random: Random) -> float:
    """`delay` spread by the jitter mode: full is uniform in [0, delay), equal in [delay/2, delay)."""
    if jitter == Jitter.FULL:
        return delay * random()
    if jitter == Jitter.EQUAL:
        return delay / 2 + delay / 2 * random()
    return delay


@dataclass(frozen=True)
class Decision:
    status: RunStatus  # succeeded | failed | retrying (awaiting_completion: tickwork.runs.ending)
    next_attempt_at: datetime | None = None
    reason: str | None = None  # why a failure that could have been retried was not


def decide(
    policy: RetryPolicy, attempt: int, succeeded: bool, retryable: bool, now: datetime,
    retry_after_seconds: float | None = None, random: Random | None = None,
) -> Decision:
    """What happens to an execution after attempt `attempt` ended as described. Without `random` no
    jitter is applied (the sweeper's and older callers' exact timing)."""
    if succeeded:
        return Decision(RunStatus.SUCCEEDED)
    if not retryable or attempt >= policy.max_attempts:
        return Decision(RunStatus.FAILED)
    delay = delay_after(policy, attempt)
    if random is not None:
        delay = jittered(delay, policy.jitter, random)
    if retry_after_seconds is not None:
        # The target asked for a pause (429/503 Retry-After): honour it, within the same ceiling.
        delay = min(max(delay, retry_after_seconds), ceiling(policy))
    return Decision(RunStatus.RETRYING, now + timedelta(seconds=delay))


def before_next_slot(policy: RetryPolicy, decision: Decision, next_slot: datetime | None) -> Decision:
    """A retry that would land after the job's next slot ends the run instead, unless the policy allows
    it (`past_next_run`): a late retry would run next to, or after, the run that replaces it."""
    at = decision.next_attempt_at
    if at is None or next_slot is None or policy.past_next_run or at <= next_slot:
        return decision
    return Decision(RunStatus.FAILED, reason=(
        f"not retried: the next attempt would be after the job's next run at {rfc3339(next_slot)}"
        " (retry.past_next_run is false)"))


@dataclass(frozen=True)
class Bound:
    """What limits a run's retry: its job's next slot (None: none, or not needed), and whether its job
    no longer makes the run (`stopped`: 'paused' or 'deleted'; None while it does)."""

    next_slot: datetime | None = None
    stopped: str | None = None


def within(policy: RetryPolicy, decision: Decision, bound: Bound) -> Decision:
    """A retry of a run its job no longer makes is not made: the job stops at once, whatever its next
    slot (a paused or deleted job has none). Otherwise before_next_slot decides."""
    if decision.next_attempt_at is not None and bound.stopped is not None:
        return Decision(RunStatus.FAILED, reason=f"not retried: the job was {bound.stopped}")
    return before_next_slot(policy, decision, bound.next_slot)


def needs_next_slot(policy: RetryPolicy, decision: Decision) -> bool:
    return decision.next_attempt_at is not None and not policy.past_next_run
