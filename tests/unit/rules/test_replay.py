"""Replay rules: which runs, which windows, when each run of a batch goes, and how attempts are counted."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from tickwork.rules import replay

T0 = datetime(2029, 11, 4, 6, 30, tzinfo=timezone.utc)


def test_a_batch_goes_one_run_per_gap_from_its_start_in_order() -> None:
    at = replay.instants(T0, 4, per_second=10)
    assert at == [T0, T0 + timedelta(milliseconds=100), T0 + timedelta(milliseconds=200),
                  T0 + timedelta(milliseconds=300)]
    assert replay.instants(T0, 0, per_second=10) == []
    # 10,000 runs at the default pace take 1,000 s less one gap: the pace bounds the whole batch.
    assert replay.instants(T0, 10_000, per_second=10)[-1] - T0 == timedelta(seconds=999.9)


def test_a_window_must_be_forward_and_at_most_31_days() -> None:
    assert replay.window_problem(T0, T0 + timedelta(days=31)) is None
    assert replay.window_problem(T0, T0) == "must be later than since"
    assert replay.window_problem(T0, T0 - timedelta(seconds=1)) == "must be later than since"
    assert "at most 31 days" in (replay.window_problem(T0, T0 + timedelta(days=31, milliseconds=1)) or "")


@pytest.mark.parametrize("status", replay.REPLAYABLE)
def test_ended_runs_that_did_not_succeed_may_be_replayed(status: str) -> None:
    assert replay.refusal(status) is None


@pytest.mark.parametrize(("status", "says"), [("succeeded", "succeeded"), ("running", "still in progress"),
                                              ("queued", "still in progress"), ("retrying", "still in progress"),
                                              ("waiting", "still in progress")])
def test_succeeded_and_unfinished_runs_are_refused(status: str, says: str) -> None:
    assert says in (replay.refusal(status) or "")


def test_the_retry_policy_counts_the_replays_attempts_from_one() -> None:
    # A run that failed after 3 attempts, replayed: its attempts 4, 5, 6 are the replay's 1, 2, 3.
    assert [replay.replay_attempt(n, 3) for n in (4, 5, 6)] == [1, 2, 3]
    assert replay.replay_attempt(1, 0) == 1  # a missed slot's first run


def test_a_replayed_runs_retry_is_bounded_from_when_its_attempt_started() -> None:
    slot, started = T0, T0 + timedelta(days=2)
    assert replay.retry_origin(slot, started, replayed=False) == slot
    assert replay.retry_origin(slot, started, replayed=True) == started
    assert replay.retry_origin(slot, None, replayed=True) == slot


def test_too_many_names_where_a_window_that_fits_ends() -> None:
    assert "end it at or before 2029-11-04T06:30:00+00:00" in replay.too_many(10_001, T0)


def test_a_run_at_the_replay_limit_is_refused_whatever_its_status() -> None:
    assert replay.refusal("failed", replay.MAX_REPLAYS_PER_RUN - 1) is None
    for status in replay.REPLAYABLE:
        assert f"replayed {replay.MAX_REPLAYS_PER_RUN} times" in (replay.refusal(status, replay.MAX_REPLAYS_PER_RUN)
                                                                  or "")


def test_the_replays_waiting_are_those_the_pace_reserved_from_now_on() -> None:
    assert replay.waiting(T0 - timedelta(seconds=5), T0, per_second=10) == 0  # the pace is idle
    assert replay.waiting(T0, T0, per_second=10) == 0
    # 20 runs paced from a 6 ms lead: the last goes at +1.906 s, and the pace's next instant is +2.006 s.
    assert replay.waiting(T0 + timedelta(milliseconds=2006), T0, per_second=10) == 20
    assert replay.waiting(T0 + timedelta(seconds=3600), T0, per_second=10) == 36_000


def test_the_quota_says_how_many_wait_and_when_the_rest_fits() -> None:
    assert replay.over_quota(20, 5, 25, per_second=10) is None
    why = replay.over_quota(20, 10, 25, per_second=10) or ""
    assert "20 replayed runs waiting" in why and "at most 25 (max_replays_queued)" in why and "fit in 1 s" in why
    assert "fit in 50 s" in (replay.over_quota(36_000, 500, 36_000, per_second=10) or "")
    # More than the quota at once never fits: the message says how many may go in one request.
    assert "replay at most 25 at once" in (replay.over_quota(0, 26, 25, per_second=10) or "")
    assert "at most 0" in (replay.over_quota(0, 1, 0, per_second=10) or "")
