"""Rebuilding the due index after Redis lost it (issue 8, section 4).

One workspace of `jobs` daily jobs (as the idle benchmark writes them) plus `due_jobs` jobs due every
second, then the index is lost (its keys deleted, as a FLUSHALL or a failover to an empty replica would)
three times over:

1. the old code path (bench/baseline_rebuild.py, the rebuild of commit 149bc66), timed in one call;
2. today's rebuild with no budget (`reconcile.rebuild_step` with `UNBOUNDED`), timed in one call;
3. today's path as it runs: the real `Poller.tick` at half past each second, each tick spending at most
   its budget on the rebuild and then dispatching what is indexed so far, until the marker is back.

Each rebuilt index is checked: every job indexed, with its Postgres next_run_at as its score.
"""
from __future__ import annotations

import math
import statistics
import time
from datetime import datetime, timezone
from typing import Any

from bench import baseline_rebuild
from bench.harness import EVERY_SECOND, ONCE_A_DAY, RecordingInvoker, Servers, Workspace, insert_jobs, sleep_until
from tickwork.dispatch.poller import REBUILD_SECONDS, Poller
from tickwork.dueindex.index import DueIndex
from tickwork.dueindex.reconcile import UNBOUNDED, rebuild_step

# Far enough ahead that none of the daily jobs comes due while measuring.
FUTURE_SECONDS = 3600
UNREACHABLE_URL = "http://127.0.0.1:9/never"
MAX_TICKS = 600


def _lose_index(ws: Workspace, index: DueIndex) -> None:
    for key in (index.marker_key, index.rebuild_key, index.specs_key, index.due_key):
        ws.redis.unlink(key)


def _check(ws: Workspace, index: DueIndex, jobs: int, due_jobs: int, next_run_ms: int) -> None:
    """Every job back and the index whole, the daily jobs at their Postgres next_run_at."""
    count = ws.redis.zcard(index.due_key)
    at_slot = ws.redis.zcount(index.due_key, next_run_ms, next_run_ms)
    if count != jobs + due_jobs or at_slot != jobs or not index.is_built():
        raise RuntimeError(f"rebuilt index is wrong: {count:,} members, {at_slot:,} at their slot")


def _timed(call: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    result = call()
    return time.perf_counter() - started, result


def _through_ticks(poller: Poller, index: DueIndex, invoker: RecordingInvoker) -> dict[str, Any]:
    """Tick at half past each second until the index is whole; each tick's duration and what it did."""
    ticks: list[dict[str, Any]] = []
    lost_at = time.time()
    while not index.is_built() and len(ticks) < MAX_TICKS:
        sleep_until(math.floor(time.time() - 0.5) + 1.5)  # half past the next second, as the loop ticks
        started = time.perf_counter()
        result = poller.tick(int(time.time() * 1000))
        ticks.append({"seconds": time.perf_counter() - started, "reindexed": result.reindexed,
                      "rebuild_seconds": result.rebuild_ms / 1000,
                      "dispatched": result.dispatched, "rebuilt": result.rebuilt})
    durations = [t["seconds"] for t in ticks]
    return {
        "ticks": len(ticks), "healed_seconds": time.time() - lost_at,
        "tick_max_seconds": max(durations), "tick_p50_seconds": statistics.median(durations),
        "step_max_seconds": max(t["rebuild_seconds"] for t in ticks),
        "dispatched": sum(t["dispatched"] for t in ticks),
        "dispatched_before_whole": sum(t["dispatched"] for t in ticks[:-1]),
        "per_tick": ticks,
    }


def run(servers: Servers, jobs: int, due_jobs: int, baseline: bool) -> dict[str, Any]:
    with Workspace(servers, "rebuild") as ws:
        invoker = RecordingInvoker()
        svc = ws.services(invoker=invoker, db_pool_size=2)
        index = DueIndex(svc.redis, ws.namespace)
        next_run_ms = (int(time.time()) + FUTURE_SECONDS) * 1000
        setup, _ = _timed(lambda: insert_jobs(ws, jobs, ONCE_A_DAY, next_run_ms, UNREACHABLE_URL, "bench"))
        insert_jobs(ws, due_jobs, EVERY_SECOND, int(time.time()) * 1000, UNREACHABLE_URL, "due")
        with ws.connect() as conn:
            conn.execute("ANALYZE jobs")  # as autovacuum would have long before Redis was lost
        now = datetime.now(timezone.utc)
        report: dict[str, Any] = {"jobs": jobs, "due_jobs": due_jobs, "setup_seconds": setup,
                                  "budget_seconds": REBUILD_SECONDS}
        with ws.connect() as conn:
            if baseline:
                _lose_index(ws, index)
                report["baseline_seconds"], _ = _timed(
                    lambda: baseline_rebuild.rebuild_index(conn, index, ws.redis, now))
                _check(ws, index, jobs, due_jobs, next_run_ms)
            _lose_index(ws, index)
            report["seconds"], _ = _timed(lambda: rebuild_step(conn, index, now, UNBOUNDED))
            _check(ws, index, jobs, due_jobs, next_run_ms)
        _lose_index(ws, index)
        report["ticking"] = _through_ticks(Poller(svc), index, invoker)
        _check(ws, index, jobs, due_jobs, next_run_ms)
        return report
