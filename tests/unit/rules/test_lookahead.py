"""The adaptive lookahead: heavy instants are claimed further ahead than light ones; `now` pinned."""
from __future__ import annotations

import pytest

from tickwork.errors import ConfigurationError
from tickwork.rules.lookahead import horizon_ms, seconds_ahead
from tickwork.runs.executor import MAX_EARLY_WAIT_SECONDS
from tickwork.settings import MAX_LOOKAHEAD_LIMIT_MS, Settings

NOW = 1_800_000_000_500  # half past a second, where the loop ticks
BASE, MAX, RATE = 1500, 10_000, 2000


def _horizon(counts: list[int], spread: int = 1) -> int:
    first, _ = seconds_ahead(NOW, BASE, MAX)
    return horizon_ms(NOW, BASE, MAX, RATE, first, counts, spread)


def test_the_seconds_counted_start_past_the_base_horizon_and_end_at_the_maximum() -> None:
    first, count = seconds_ahead(NOW, BASE, MAX)
    assert first == 1_800_000_003_000  # the base horizon, 2.0 s ahead, includes the slot at +2 s
    assert first + (count - 1) * 1000 <= NOW + MAX < first + count * 1000
    assert seconds_ahead(NOW, BASE, BASE) == (first, 0)


def test_light_seconds_leave_the_base_lookahead_alone() -> None:
    assert _horizon([1000, 500, 0, 2000, 2000, 2000, 2000, 2000, 2000]) == NOW + BASE


def test_ten_thousand_runs_in_one_second_are_claimed_six_and_a_half_seconds_ahead() -> None:
    # Lead: 1.5 s + 10,000 runs / 2,000 per second = 6.5 s. The second at +6.5 s is claimed whole.
    at_plus = {k: [0] * 8 for k in range(8)}
    for k in at_plus:
        at_plus[k][k] = 10_000
    claimed = [k for k, counts in at_plus.items() if _horizon(counts) > NOW + BASE]
    assert claimed == [0, 1, 2, 3, 4]  # the seconds 2.5 ... 6.5 s ahead: inside the 6.5 s lead
    assert _horizon(at_plus[4]) == 1_800_000_007_999


def test_the_lead_never_passes_the_maximum_lookahead() -> None:
    first, count = seconds_ahead(NOW, BASE, MAX)
    assert count == 8 and first + (count - 1) * 1000 - NOW <= MAX  # the last counted starts 9.5 s ahead
    assert _horizon([0] * 7 + [1_000_000]) == 1_800_000_010_999
    assert _horizon([0] * 7 + [1_000_000, 1_000_000]) == 1_800_000_010_999  # 10.5 s ahead: not yet


def test_a_shard_sees_its_share_of_the_load() -> None:
    assert _horizon([0, 0, 3_400]) == NOW + BASE  # 1.5 + 1.7 s lead: +4.5 s not reached
    assert _horizon([0, 0, 3_400], spread=3) == 1_800_000_005_999  # 10,200 over three shards


def test_the_maximum_lookahead_is_bounded_by_how_long_an_executor_waits() -> None:
    env = {"DATABASE_URL": "postgresql://h/db", "REDIS_URL": "redis://h:6379/0"}
    assert Settings.from_env({**env, "TICKWORK_MAX_LOOKAHEAD_MS": "15000"}).max_lookahead_ms == 15_000
    with pytest.raises(ConfigurationError, match="TICKWORK_MAX_LOOKAHEAD_MS must be at most 15000"):
        Settings.from_env({**env, "TICKWORK_MAX_LOOKAHEAD_MS": "15001"})
    assert MAX_LOOKAHEAD_LIMIT_MS / 1000 < MAX_EARLY_WAIT_SECONDS
