"""The runs-in-flight rules without I/O: places' lapse, when a run held back is looked at again, and when
one is missed by its job's catch-up policy."""
from __future__ import annotations

from tickwork.rules import budget
from tickwork.rules.budget import HeldBack

NOW = 1_796_040_000_000  # 2026-11-30 12:00:00 UTC, in ms


def test_a_place_lapses_after_the_longest_request_and_the_lost_margin_from_its_instant() -> None:
    assert budget.lapse_ms(NOW + 5_000, NOW, 120, 60) == NOW + 185_000
    assert budget.lapse_ms(NOW - 5_000, NOW, 120, 60) == NOW + 180_000  # a late dispatch counts from now


def test_a_run_held_back_longer_is_looked_at_less_often() -> None:
    assert budget.delay_ms(None, NOW) == 1_000
    assert budget.delay_ms(NOW - 2_000, NOW) == 1_000
    assert budget.delay_ms(NOW - 20_000, NOW) == 5_000
    assert budget.delay_ms(NOW - 3_600_000, NOW) == budget.MAX_DELAY_MS


def test_a_run_held_back_follows_its_jobs_catch_up_policy() -> None:
    inside = HeldBack(NOW - 299_000, "latest", 300, superseded=False)
    assert budget.missed_note(inside, NOW) is None
    assert "catch-up window (300 s)" in (budget.missed_note(HeldBack(NOW - 301_000, "all", 300, False), NOW) or "")
    assert "catch-up latest" in (budget.missed_note(HeldBack(NOW - 1_000, "latest", 300, True), NOW) or "")
    assert budget.missed_note(HeldBack(NOW - 1_000, "all", 300, True), NOW) is None
    # A window shorter than the lateness tolerance never makes a slow tick a miss.
    assert budget.missed_note(HeldBack(NOW - 4_000, "all", 0, False), NOW) is None


def test_a_run_held_back_is_looked_at_again_no_earlier_than_its_instant() -> None:
    assert budget.looked_at_again_ms(NOW - 500, None, NOW) == NOW + 1_000
    assert budget.looked_at_again_ms(NOW + 1_500, None, NOW) == NOW + 1_500  # handed over ahead: kept for its instant
    assert budget.looked_at_again_ms(NOW + 4_000, NOW - 20_000, NOW) == NOW + 5_000
