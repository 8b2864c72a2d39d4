"""Steady: N jobs firing every second for S seconds: lag p50 / p99 / max, dropped and duplicate runs.

The jobs' first slot is second F; ticks run at F-1 ... F+S-2 (each claims the next second's slot
with the one-second lookahead), so slots F ... F+S-1 are the window measured: S runs per job.
"""
from __future__ import annotations

from typing import Any

from bench.burst import check_ahead, due_second
from bench.harness import EVERY_SECOND, SecondTicker, Servers, Workspace, create_jobs, tick_stats, wait_for
from bench.outcome import summarize, tickwork_send_lags, tickwork_statuses
from bench.rig import TickworkRig, tick_summary, warm_up
from bench.target import Target
from tickwork.dispatch.poller import TICK_OFFSET_MS

DRAIN_TIMEOUT_SECONDS = 60


def run(
    servers: Servers, target: Target, jobs: int, seconds: int, workers: int, db_pool: int, executor_processes: int = 0,
) -> dict[str, Any]:
    """executor_processes: 0 runs the executors in the poller's process, N > 0 in N processes (bench/rig.py)."""
    with Workspace(servers, "steady") as ws:
        rig = TickworkRig(ws, workers, db_pool, executor_processes=executor_processes)
        try:
            warm_up(ws, rig, target)
            first = due_second(jobs)
            job_ids = create_jobs(ws, jobs, EVERY_SECOND, first * 1000, target.url, "bench")
            check_ahead(first - 2)
            # Ticks at half past, each claiming the slot 1.5 s ahead: first at first - 1.5 s, last for the
            # window's last slot.
            ticker = SecondTicker(rig.tick, first - 2, first + seconds - 3, TICK_OFFSET_MS / 1000).start()
            ticker.join()
            drained = rig.drain(DRAIN_TIMEOUT_SECONDS)
            wait_for(lambda: target.count() >= jobs * seconds, 5)
            window = (first, first + seconds - 1)
            arrivals = target.take()
            with ws.connect() as conn:
                send_lags = tickwork_send_lags(conn, "bench", window)
                statuses = tickwork_statuses(conn, "bench", window)
            deliveries = summarize(arrivals, set(job_ids), window, seconds, send_lags)
            busy = [t for t in ticker.ticks if t.result is not None and t.result.dispatched]
            return {
                "executor_processes": executor_processes, "runs_by_process": rig.runs_by_process(),
                "deliveries": deliveries.as_dict(), "statuses": statuses, "drained": drained,
                "ticks": tick_stats([t.seconds for t in ticker.ticks], seconds),
                "tick": tick_summary(busy[len(busy) // 2].result) if busy else {},
                "tick_errors": [repr(e) for e in ticker.errors][:3],
            }
        finally:
            rig.close()

