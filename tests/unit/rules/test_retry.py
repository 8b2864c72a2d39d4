from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from tickwork.rules.retry import MAX_DELAY_SECONDS, RetryPolicy, decide, delay_after, is_retryable_status

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [("exponential", [10, 20, 40, 80]), ("linear", [10, 20, 30, 40]), ("fixed", [10, 10, 10, 10])],
)
def test_delay_grows_per_strategy(strategy: str, expected: list[int]) -> None:
    policy = RetryPolicy(strategy, 10, 10)
    assert [delay_after(policy, n) for n in range(1, 5)] == expected


def test_delay_is_capped() -> None:
    assert delay_after(RetryPolicy("exponential", 100, 60), 60) == MAX_DELAY_SECONDS


@pytest.mark.parametrize("status", [500, 502, 503, 504, 408, 429])
def test_transient_statuses_are_retryable(status: int) -> None:
    assert is_retryable_status(status)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 422])
def test_client_errors_are_final(status: int) -> None:
    assert not is_retryable_status(status)


def test_decide_success_ends_the_run() -> None:
    assert decide(RetryPolicy(), 1, True, False, NOW).status == "succeeded"


def test_decide_retryable_failure_schedules_the_next_attempt() -> None:
    decision = decide(RetryPolicy("exponential", 3, 5), 2, False, True, NOW)
    assert decision.status == "retrying"
    assert decision.next_attempt_at == NOW + timedelta(seconds=10)


def test_decide_last_attempt_fails() -> None:
    assert decide(RetryPolicy("fixed", 2, 5), 2, False, True, NOW).status == "failed"


def test_decide_non_retryable_fails_at_once() -> None:
    assert decide(RetryPolicy("fixed", 5, 5), 1, False, False, NOW).status == "failed"


def test_retry_after_lengthens_but_never_shortens_the_delay() -> None:
    policy = RetryPolicy("fixed", 5, 30)
    assert decide(policy, 1, False, True, NOW, retry_after_seconds=120).next_attempt_at == NOW + timedelta(seconds=120)
    assert decide(policy, 1, False, True, NOW, retry_after_seconds=1).next_attempt_at == NOW + timedelta(seconds=30)


def test_policy_defaults_fill_missing_fields() -> None:
    assert RetryPolicy.from_dict({"max_attempts": 7}) == RetryPolicy("exponential", 7, 10)
