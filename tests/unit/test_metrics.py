"""The executor's attempt metrics, as the embedded-metric-format document would carry them."""
from __future__ import annotations

from typing import Any

from tickwork import metrics


def _recorded() -> dict[str, Any]:
    recorded = {name: (entry["Unit"], list(entry["Value"])) for name, entry in metrics._metrics.metric_set.items()}
    metrics.flush()
    return recorded


def test_a_group_of_attempts_counts_once_per_status_and_keeps_every_lag_and_duration() -> None:
    metrics.flush()
    metrics.record_attempts([("succeeded", 5, 10), ("succeeded", -2, 12), ("retrying", None, 30)])
    assert _recorded() == {
        "RunsSucceeded": ("Count", [2.0]),
        "RunsRetrying": ("Count", [1.0]),
        "FireLag": ("Milliseconds", [5.0, 0.0]),  # a run sent a hair early counts as on time
        "RequestDuration": ("Milliseconds", [10.0, 12.0, 30.0]),
    }


def test_nothing_recorded_leaves_nothing_to_flush() -> None:
    metrics.flush()
    metrics.record_attempts([])
    assert _recorded() == {}
