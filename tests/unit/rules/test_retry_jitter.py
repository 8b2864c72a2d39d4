"""Retry jitter, the delay ceiling and the next-slot bound: pure, with `now` and the random source pinned."""
from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

import pytest

from tickwork.rules import retry
from tickwork.rules.retry import Decision, RetryPolicy

NOW = datetime(2026, 3, 29, 0, 59, 30, tzinfo=timezone.utc)  # half a minute before a DST change in Europe


def _fixed(value: float) -> retry.Random:
    return lambda: value


@pytest.mark.parametrize(("jitter", "draw", "expected"), [
    ("none", 0.3, 40.0), ("full", 0.0, 0.0), ("full", 0.25, 10.0), ("full", 0.999, 39.96),
    ("equal", 0.0, 20.0), ("equal", 0.5, 30.0),
])
def test_jitter_spreads_the_wait(jitter: str, draw: float, expected: float) -> None:
    assert retry.jittered(40.0, jitter, _fixed(draw)) == pytest.approx(expected)


def test_a_seeded_source_gives_the_same_retry_times_and_stays_in_bounds() -> None:
    policy = RetryPolicy(strategy="fixed", max_attempts=5, delay_seconds=100, jitter="equal")

    def times(seed: int) -> list[datetime | None]:
        source = random.Random(seed).random
        return [retry.decide(policy, 1, False, True, NOW, random=source).next_attempt_at for _ in range(20)]

    first = times(7)
    assert first == times(7) and first != times(8)
    assert all(NOW + timedelta(seconds=50) <= at < NOW + timedelta(seconds=100) for at in first if at)


def test_no_random_source_means_exact_delays() -> None:
    policy = RetryPolicy(strategy="fixed", delay_seconds=10, jitter="full")
    assert retry.decide(policy, 1, False, True, NOW).next_attempt_at == NOW + timedelta(seconds=10)


def test_max_delay_caps_the_curve_and_retry_after() -> None:
    policy = RetryPolicy(strategy="exponential", max_attempts=10, delay_seconds=100, jitter="none",
                         max_delay_seconds=300)
    assert [retry.delay_after(policy, n) for n in (1, 2, 3, 4)] == [100, 200, 300, 300]
    decision = retry.decide(policy, 1, False, True, NOW, retry_after_seconds=7200, random=_fixed(0.5))
    assert decision.next_attempt_at == NOW + timedelta(seconds=300)


def test_jobs_stored_before_the_new_fields_keep_their_timing() -> None:
    stored = RetryPolicy.from_dict({"strategy": "exponential", "max_attempts": 3, "delay_seconds": 10})
    assert (stored.jitter, stored.max_delay_seconds, stored.past_next_run) == ("none", retry.MAX_DELAY_SECONDS, True)
    assert retry.decide(stored, 2, False, True, NOW, random=_fixed(0.0)).next_attempt_at == NOW + timedelta(seconds=20)
    assert retry.before_next_slot(stored, Decision("retrying", NOW + timedelta(hours=2)),
                                  NOW + timedelta(hours=1)).status == "retrying"


def test_a_retry_after_the_next_slot_ends_the_run_with_the_reason() -> None:
    policy = RetryPolicy.from_dict({"delay_seconds": 60, "past_next_run": False})
    next_slot = NOW + timedelta(seconds=45)
    decided = retry.before_next_slot(policy, Decision("retrying", NOW + timedelta(seconds=60)), next_slot)
    assert decided.status == "failed" and decided.next_attempt_at is None
    assert decided.reason == ("not retried: the next attempt would be after the job's next run at "
                              "2026-03-29T01:00:15.000Z (retry.past_next_run is false)")


def test_a_retry_up_to_the_next_slot_goes_ahead() -> None:
    policy = RetryPolicy.from_dict({"past_next_run": False})
    on_time = Decision("retrying", NOW + timedelta(seconds=45))
    assert retry.before_next_slot(policy, on_time, NOW + timedelta(seconds=45)) == on_time
    assert retry.before_next_slot(policy, on_time, None) == on_time  # a job with no next run
    assert retry.needs_next_slot(policy, on_time) and not retry.needs_next_slot(policy, Decision("failed"))


def test_past_next_run_allows_a_late_retry() -> None:
    policy = RetryPolicy.from_dict({"past_next_run": True})
    late = Decision("retrying", NOW + timedelta(hours=1))
    assert retry.before_next_slot(policy, late, NOW + timedelta(seconds=1)) == late
    assert not retry.needs_next_slot(policy, late)


@pytest.mark.parametrize("past_next_run", [False, True])
def test_no_retry_for_a_run_its_job_no_longer_makes(past_next_run: bool) -> None:
    """A paused or deleted job has no next slot: that must not read as "no bound, retry"."""
    policy = RetryPolicy.from_dict({"past_next_run": past_next_run})
    retrying = Decision("retrying", NOW + timedelta(seconds=10))
    for stopped in ("paused", "deleted"):
        assert retry.within(policy, retrying, retry.Bound(None, stopped)) == Decision(
            "failed", reason=f"not retried: the job was {stopped}")
    assert retry.within(policy, Decision("succeeded"), retry.Bound(None, "paused")) == Decision("succeeded")
    assert retry.within(policy, retrying, retry.Bound(None)) == retrying  # completed, or a one-time schedule
