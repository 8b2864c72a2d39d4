"""Retry policy: which failures are retried and when the next attempt is due. Pure: `now` is passed in."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Mapping

STRATEGIES = ("exponential", "linear", "fixed")
DEFAULT_STRATEGY = "exponential"
DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_DELAY_SECONDS = 10
# However steep the curve, a run never waits more than a day between attempts.
MAX_DELAY_SECONDS = 86_400
# 408 and 429 say "try later"; every 5xx may be transient. Other statuses are the caller's problem.
RETRYABLE_STATUS = frozenset({408, 429})


@dataclass(frozen=True)
class RetryPolicy:
    strategy: str = DEFAULT_STRATEGY
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    delay_seconds: float = DEFAULT_DELAY_SECONDS

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any] | None) -> RetryPolicy:
        raw = raw or {}
        return cls(
            strategy=str(raw.get("strategy", DEFAULT_STRATEGY)),
            max_attempts=int(raw.get("max_attempts", DEFAULT_MAX_ATTEMPTS)),
            delay_seconds=float(raw.get("delay_seconds", DEFAULT_DELAY_SECONDS)),
        )


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
    return min(delay, MAX_DELAY_SECONDS)


@dataclass(frozen=True)
class Decision:
    status: str  # succeeded | failed | retrying
    next_attempt_at: datetime | None = None


def decide(
    policy: RetryPolicy, attempt: int, succeeded: bool, retryable: bool, now: datetime,
    retry_after_seconds: float | None = None,
) -> Decision:
    """What happens to an execution after attempt `attempt` ended as described."""
    if succeeded:
        return Decision("succeeded")
    if not retryable or attempt >= policy.max_attempts:
        return Decision("failed")
    delay = delay_after(policy, attempt)
    if retry_after_seconds is not None:
        # The target asked for a pause (429/503 Retry-After): honour it, within the same ceiling.
        delay = min(max(delay, retry_after_seconds), MAX_DELAY_SECONDS)
    return Decision("retrying", now + timedelta(seconds=delay))
