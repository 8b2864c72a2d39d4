"""A tenant's recent runs in numbers: how many ended how, and how punctually the scheduler fired them."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from tickwork.scope import Scope
from tickwork.store import stats as stats_store
from tickwork.vocab import RunStatus

DEFAULT_WINDOW_SECONDS = 3600
# A day: a longer window is a report, not a health signal (a week at quota was 60 million runs to scan).
MAX_WINDOW_SECONDS = 86_400
# Runs one request counts at most, whatever the tenant's volume (a tenant at quota makes 100,000 in under
# 17 minutes): a window holding more is cut to its newest runs, and `since` says where it then starts.
MAX_RUNS = 100_000
# PostgreSQL's timestamps are to the microsecond: a slot this much later is the first one after it.
_RESOLUTION = timedelta(microseconds=1)


@dataclass(frozen=True)
class RunStats:
    since: datetime
    until: datetime
    runs: dict[str, int]  # every status, 0 included
    lag_samples: int
    lag_ms: tuple[float, float, float] | None  # p50, p95, p99; None without samples
    truncated: bool = False  # the window held more than the runs counted: `since` is later than asked


def window(now: datetime, seconds: int) -> tuple[datetime, datetime]:
    """The slots counted: from `seconds` before now up to now, now excluded."""
    return now - timedelta(seconds=seconds), now


def run_stats(scope: Scope, window_seconds: int, max_runs: int = MAX_RUNS) -> RunStats:
    """The window's runs by status and fire lag; when it holds more than `max_runs`, of its newest runs
    only, in whole slots: the window then starts after the slot of the newest run left out."""
    since, until = window(scope.now, window_seconds)
    with scope.db.connection() as conn:
        cut = stats_store.newest_slot_past(conn, scope.tenant_id, since, until, max_runs)
        if cut is not None:
            since = cut + _RESOLUTION
        counts = stats_store.runs_by_status(conn, scope.tenant_id, since, until)
        samples, percentiles = stats_store.fire_lag_percentiles(conn, scope.tenant_id, since, until)
    runs = {status.value: counts.get(status, 0) for status in RunStatus}
    lag = None if percentiles is None else (percentiles[0], percentiles[1], percentiles[2])
    return RunStats(since, until, runs, samples, lag, truncated=cut is not None)
