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


def _every_record_call() -> None:
    """Each record_* function with values that make it emit everything it can."""
    from types import SimpleNamespace

    metrics.record_tick(SimpleNamespace(locked=True, dispatched=3, delayed=1, missed=1, rebuilt=True, quarantined=2))
    metrics.record_backlog(0)
    metrics.record_attempts([(status, 1, 2) for status in metrics.ATTEMPT_STATUSES])
    for reason in ("duplicate", "skipped", "waiting", "anything else"):
        metrics.record_not_started(reason)
    metrics.record_maintenance(SimpleNamespace(rewound=1, redispatched=1, retried=1, lost=1, pruned=1, unjudged=1))


def test_names_lists_exactly_what_the_record_functions_can_emit() -> None:
    """The template's dashboard and alarms are checked against NAMES: it must be neither short nor padded."""
    metrics.flush()
    _every_record_call()
    assert set(_recorded()) == metrics.NAMES


def test_a_locked_tick_counts_one_tick_and_the_backlog_is_recorded_even_when_zero() -> None:
    from types import SimpleNamespace

    metrics.flush()
    metrics.record_tick(SimpleNamespace(locked=False, dispatched=0, delayed=0, missed=0, rebuilt=False, quarantined=0))
    assert _recorded() == {}
    metrics.record_tick(SimpleNamespace(locked=True, dispatched=0, delayed=0, missed=0, rebuilt=False, quarantined=0))
    metrics.record_backlog(0)
    assert _recorded() == {"Ticks": ("Count", [1.0]), "DueBacklog": ("Count", [0.0])}
