"""A tenant's recent runs in numbers: how many ended how, and how punctually the scheduler fired them."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from tickwork.scope import Scope
from tickwork.store import stats as stats_store
from tickwork.tenant.filters import EXECUTION_STATUSES

DEFAULT_WINDOW_SECONDS = 3600
# A week: the retention period is a month, and a longer window is a report, not a health signal.
MAX_WINDOW_SECONDS = 7 * 86_400


@dataclass(frozen=True)
class RunStats:
    since: datetime
    until: datetime
    runs: dict[str, int]  # every status, 0 included
    lag_samples: int
    lag_ms: tuple[float, float, float] | None  # p50, p95, p99; None without samples


def window(now: datetime, seconds: int) -> tuple[datetime, datetime]:
    """The slots counted: from `seconds` before now up to now, now excluded."""
    return now - timedelta(seconds=seconds), now


def run_stats(scope: Scope, window_seconds: int) -> RunStats:
    since, until = window(scope.now, window_seconds)
    with scope.db.connection() as conn:
        counts = stats_store.runs_by_status(conn, scope.tenant_id, since, until)
        samples, percentiles = stats_store.fire_lag_percentiles(conn, scope.tenant_id, since, until)
    runs = {status: counts.get(status, 0) for status in EXECUTION_STATUSES}
    lag = None if percentiles is None else (percentiles[0], percentiles[1], percentiles[2])
    return RunStats(since, until, runs, samples, lag)
