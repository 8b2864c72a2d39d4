"""The health verdict from probe results: pure, with pinned clocks."""
from __future__ import annotations

import pytest

from tickwork.dispatch.health import ERROR, MAX_TICK_AGE_SECONDS, OK, TIMEOUT, assess

NOW_MS = 1_764_583_200_000  # 2025-12-01T10:00:00Z


def test_everything_answering_and_a_fresh_tick_is_ok() -> None:
    health = assess(OK, OK, NOW_MS - 800, NOW_MS)
    assert health.ok and health.last_tick_age_seconds == 0.8


@pytest.mark.parametrize(("age_ms", "ok"), [(0, True), (5_000, True), (5_001, False), (3_600_000, False)])
def test_a_tick_older_than_five_seconds_is_degraded(age_ms: int, ok: bool) -> None:
    assert MAX_TICK_AGE_SECONDS == 5
    assert assess(OK, OK, NOW_MS - age_ms, NOW_MS).ok is ok


def test_no_tick_recorded_is_degraded() -> None:
    health = assess(OK, OK, None, NOW_MS)
    assert not health.ok and health.last_tick_age_seconds is None


@pytest.mark.parametrize(("postgres", "redis"), [(ERROR, OK), (TIMEOUT, OK), (OK, ERROR), (OK, TIMEOUT)])
def test_a_store_that_does_not_answer_is_degraded(postgres: str, redis: str) -> None:
    assert not assess(postgres, redis, NOW_MS, NOW_MS).ok


def test_a_tick_stamped_ahead_of_this_clock_counts_as_fresh() -> None:
    # The poller's clock may run a little ahead of the API's: never a negative age.
    assert assess(OK, OK, NOW_MS + 300, NOW_MS).last_tick_age_seconds == 0
