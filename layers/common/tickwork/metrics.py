"""CloudWatch metrics in the embedded metric format (Powertools): no API calls, one log line a flush.

Every handler flushes once per invocation; an invocation that recorded nothing writes nothing.
Set POWERTOOLS_METRICS_DISABLED=true to silence them (the local runtime and the tests do).
"""
from __future__ import annotations

import threading
from collections import Counter
from typing import Any, Sequence

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit

from tickwork.vocab import NotStarted, RunStatus

NAMESPACE = "Tickwork"
# Fixed here rather than read from POWERTOOLS_SERVICE_NAME, so every function's metrics carry the one
# dimension the dashboard and alarms (template.yaml) select on, whatever name each function logs under.
SERVICE = "tickwork"

# The decisions of tickwork.rules.retry.decide that end an attempt, each counted as Runs<Status>.
ATTEMPT_STATUSES = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.RETRYING)
_NOT_STARTED: dict[str, str] = {NotStarted.DUPLICATE: "DuplicateDeliveries", NotStarted.SKIPPED: "RunsSkipped",
                NotStarted.WAITING: "RunsWaiting"}
_MAINTENANCE = ("rewound", "redispatched", "retried", "lost", "pruned", "unjudged")
# Every metric name this module can emit: the template's dashboard and alarms may chart only these
# (tests/unit/test_template.py checks it).
NAMES = frozenset({
    "Ticks", "DueBacklog", "Dispatched", "RunsDelayed", "MissedRuns", "IndexRebuilds", "FireLag", "RequestDuration",
    "QuarantinedEntries",
    "RunsNotStarted", *_NOT_STARTED.values(),
    *(f"Runs{status.capitalize()}" for status in ATTEMPT_STATUSES),
    *(f"Maintenance{name.capitalize()}" for name in _MAINTENANCE),
})

_metrics = Metrics(namespace=NAMESPACE, service=SERVICE)
# Grouped runs are executed on threads of one invocation; Powertools' metric set is a plain dict.
_lock = threading.Lock()


def count(name: str, value: float = 1) -> None:
    if value:
        with _lock:
            _metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)


def record_tick(result: Any) -> None:
    """A tick that held the tick lock counts in Ticks (one that found another poller ticking does not:
    that one counts); a minute without any is a stopped loop."""
    count("Ticks", int(result.locked))
    count("Dispatched", result.dispatched)
    count("RunsDelayed", result.delayed)
    count("MissedRuns", result.missed)
    count("IndexRebuilds", int(result.rebuilt))
    # Due-index entries whose handling raised, set aside (tickwork.dispatch.quarantine): 0 in a healthy tick.
    count("QuarantinedEntries", result.quarantined)


def record_backlog(due: int) -> None:
    """Index entries already due that a tick left behind (0 when it kept up): recorded even when 0, so
    the dashboard shows a line rather than gaps."""
    with _lock:
        _metrics.add_metric(name="DueBacklog", unit=MetricUnit.Count, value=max(due, 0))


def record_attempts(attempts: Sequence[tuple[str, int | None, int]]) -> None:
    """(status, fire lag in ms or None for a retry, request duration in ms) of attempts that ended:
    one count per status, one value per attempt for the lag and duration distributions."""
    for status, runs in Counter(status for status, _, _ in attempts).items():
        count(f"Runs{status.capitalize()}", runs)
    with _lock:
        for _, lag_ms, duration_ms in attempts:
            if lag_ms is not None:
                _metrics.add_metric(name="FireLag", unit=MetricUnit.Milliseconds, value=max(lag_ms, 0))
            _metrics.add_metric(name="RequestDuration", unit=MetricUnit.Milliseconds, value=duration_ms)


def record_not_started(reason: str) -> None:
    """A dispatch that did not run: a duplicate delivery, or an overlap policy's skip/wait."""
    count(_NOT_STARTED.get(reason, "RunsNotStarted"))


def record_maintenance(report: Any) -> None:
    for name in _MAINTENANCE:
        count(f"Maintenance{name.capitalize()}", getattr(report, name))


def flush() -> None:
    with _lock:
        if _metrics.metric_set:
            _metrics.flush_metrics()
        # Disabled metrics are not printed, and Powertools then keeps them: never carry them over.
        _metrics.clear_metrics()
