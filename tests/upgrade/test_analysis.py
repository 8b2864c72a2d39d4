"""The window's tick attribution (pure): a tick that overran on a loaded machine is not two pollers in a second."""

from __future__ import annotations

from tests.upgrade.analysis import ticks_per_second


def test_each_tick_counts_for_the_second_it_worked() -> None:
    ticks = {"old": [100.6, 102.7], "new": [101.6, 103.55]}
    assert ticks_per_second(ticks, 100, 103) == {100: ["old"], 101: ["new"], 102: ["old"], 103: ["new"]}


def test_a_tick_that_overran_into_the_next_seconds_span_keeps_its_own_second() -> None:
    # The tick of 101 took 1.1 s (logged at 102.6, in 102's span); the loop skipped 102's start meanwhile.
    ticks = {"old": [100.6, 102.6], "new": [102.8, 103.6]}
    found = ticks_per_second(ticks, 100, 103)
    assert [len(who) for who in found.values()] == [1, 1, 1, 1]
    assert sorted(label for who in found.values() for label in who) == ["new", "new", "old", "old"]


def test_two_pollers_in_one_second_are_found_when_every_second_was_worked() -> None:
    ticks = {"old": [100.6, 101.6, 102.6], "new": [101.7, 103.6]}
    found = ticks_per_second(ticks, 100, 103)
    assert [second for second, who in found.items() if len(who) > 1] == [101]
