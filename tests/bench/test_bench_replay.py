"""The replay benchmark's pace figures and windows (bench/replay.py), on arrivals made up here."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from bench.replay import GAP_SECONDS, Plan, pace, paced, timeline
from bench.target import Arrival

JOB = "job-a"
FIRST_AT = 1_900_000_000.0  # a fixed epoch second: nothing here reads the clock
SLOT0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def arrivals(lags_ms: list[float], rate: int) -> list[Arrival]:
    """The i-th run (slot i minutes after SLOT0) arriving lags_ms[i] after its paced instant."""
    return [Arrival(FIRST_AT + i / rate + lag / 1000, f"run-{i}", JOB,
                    (SLOT0 + timedelta(minutes=i)).isoformat().replace("+00:00", "Z"))
            for i, lag in enumerate(lags_ms)]


def test_runs_sent_at_their_instants_are_within_the_pace() -> None:
    got = pace(arrivals([2.0] * 400, rate=100), JOB, 100, FIRST_AT)
    assert (got["delivered"], got["duplicates"], got["out_of_order"]) == (400, 0, 0)
    assert got["lag_ms"]["early"] == 0 and round(got["lag_ms"]["p99"], 3) == 2.0
    assert got["busiest_second"] == 100 and got["within_pace"]


def test_a_run_sent_ahead_of_its_instant_is_over_the_pace() -> None:
    lags = [2.0] * 400
    lags[200] = -50.0
    got = pace(arrivals(lags, rate=100), JOB, 100, FIRST_AT)
    assert got["lag_ms"]["early"] == 1 and got["lag_ms"]["min"] < -49
    assert not got["within_pace"]


def test_late_runs_gathering_with_the_next_keep_the_pace_and_show_in_the_busiest_second() -> None:
    # Runs 100-119 held up and sent together 150 ms after the last one's instant: a second of arrivals holds
    # those 20 and the next second's 100, yet none was sent ahead of its instant.
    lags = [1.0] * 400
    for i in range(100, 120):
        lags[i] = 150.0 + (119 - i) * 10.0
    got = pace(arrivals(lags, rate=100), JOB, 100, FIRST_AT)
    assert got["busiest_second"] == 120 and got["lag_ms"]["early"] == 0 and round(got["lag_ms"]["max"]) == 340
    assert got["within_pace"]


def test_a_tick_handed_over_at_once_is_early_and_over_the_pace() -> None:
    # Every run of each second sent at the second's start: the later ones arrive up to a second early.
    lags = [-(i % 100) * 10.0 for i in range(400)]
    got = pace(arrivals(lags, rate=100), JOB, 100, FIRST_AT)
    assert got["lag_ms"]["early"] == 396 and not got["within_pace"]


def test_without_the_first_instant_the_pace_cannot_be_judged() -> None:
    got = pace(arrivals([0.0] * 300, rate=100), JOB, 100)
    assert got["lag_ms"] is None and got["busiest_second"] == 100 and not got["within_pace"]
    assert pace(arrivals([0.0] * 300, rate=200), JOB, 100)["busiest_second"] == 200


def test_batches_replayed_one_after_the_other_are_each_paced_from_their_own_first_instant() -> None:
    later = FIRST_AT + 30.0  # the second request's first instant: its runs start over at i = 0
    first, second = arrivals([1.0] * 200, rate=100), arrivals([1.0] * 400, rate=100)[200:]
    second = [Arrival(later + (a.at - FIRST_AT - 2.0), a.run_id, JOB, a.scheduled_for) for a in second]
    since = (SLOT0 + timedelta(minutes=200)).timestamp()
    got = paced(first + second, JOB, 100, [(None, FIRST_AT), (since, later)])
    assert got["delivered"] == 400 and got["lag_ms"]["early"] == 0 and round(got["lag_ms"]["max"], 3) == 1.0
    assert round(got["paced_span_seconds"], 2) == 3.98 and got["within_pace"]
    # Taken as one batch, the second request's runs would look 28 s late.
    assert pace(first + second, JOB, 100, FIRST_AT)["lag_ms"]["max"] > 27_000


def test_rounds_interleave_alone_and_replaying_windows_that_never_overlap() -> None:
    plan = Plan(rate=200, runs=10_001, b_jobs=100, baseline_seconds=10, rounds=5)
    assert plan.batches() == [2_001, 2_000, 2_000, 2_000, 2_000]
    when = timeline(1_000, plan)
    assert len(when.alone) == 6 and all(hi - lo + 1 == 10 for lo, hi in when.alone)
    spans = sorted(when.alone + when.replaying)
    assert spans[0] == when.alone[0] and spans[-1] == when.alone[-1]
    for (lo, hi), (next_lo, _) in zip(spans, spans[1:]):
        assert next_lo > hi  # the second the request is made in, and the gap after a replay, are in neither
    for (lo, hi), count in zip(when.replaying, plan.batches()):
        assert hi - lo >= count / plan.rate  # to the batch's last instant
    assert [lo - hi_before - 1 for (_, hi_before), (lo, _) in zip(when.replaying, when.alone[1:])] == [GAP_SECONDS - 1] * 5
