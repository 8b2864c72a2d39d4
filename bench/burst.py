"""Burst: N jobs due in the same second, against the fast local target.

The jobs are due at second D. With its one-second lookahead the poller claims them at the tick of D-1
and the executors wait for D, so "dispatched" (the poller let go of the last dispatch) is measured from
that tick's start, and "arrived" (the target read the last request) from D itself.
"""
from __future__ import annotations

import time
from typing import Any

from bench.harness import ONCE_A_DAY, SecondTicker, Servers, Workspace, create_jobs, wait_for
from bench.outcome import summarize, tickwork_send_lags, tickwork_statuses
from bench.rig import TickworkRig, tick_summary, warm_up
from bench.target import Target
from tickwork.dispatch.poller import TICK_OFFSET_MS

DRAIN_TIMEOUT_SECONDS = 60
# Seconds of setup per job (insert + index), measured generously, plus a fixed margin.
SETUP_SECONDS_PER_JOB = 1 / 8000
SETUP_MARGIN_SECONDS = 0.7


def due_second(jobs: int) -> int:
    """A whole second far enough ahead that N jobs are written and indexed before the tick before it."""
    return int(time.time() + SETUP_MARGIN_SECONDS + jobs * SETUP_SECONDS_PER_JOB) + 3


def check_ahead(second: int) -> None:
    if time.time() > second - 0.05:
        raise RuntimeError(f"setup overran: second {second} already started; raise SETUP_SECONDS_PER_JOB")


def run(
    servers: Servers, target: Target, jobs: int, workers: int, db_pool: int, executors: bool,
    executor_processes: int = 0,
) -> dict[str, Any]:
    """One Tickwork burst; executors=False measures the poller alone (dispatches are only recorded).
    executor_processes: 0 runs the executors in the poller's process, N > 0 in N processes (bench/rig.py)."""
    with Workspace(servers, "burst") as ws:
        rig = TickworkRig(ws, workers, db_pool, run_executors=executors, executor_processes=executor_processes)
        try:
            warm_up(ws, rig, target)
            due = due_second(jobs)
            job_ids = create_jobs(ws, jobs, ONCE_A_DAY, due * 1000, target.url, "bench")
            check_ahead(due - 1)
            ticker = SecondTicker(rig.tick, due - 1, due + 1, TICK_OFFSET_MS / 1000).start()
            ticker.join()
            drained = rig.drain(DRAIN_TIMEOUT_SECONDS)
            if executors:
                wait_for(lambda: target.count() >= jobs, 5)
            return {"executor_processes": executor_processes if executors else None,
                    "runs_by_process": rig.runs_by_process(),
                    **_result(ws, rig, target, ticker, job_ids, due, drained)}
        finally:
            rig.close()


def _result(
    ws: Workspace, rig: TickworkRig, target: Target, ticker: SecondTicker, job_ids: list[str], due: int,
    drained: bool,
) -> dict[str, Any]:
    burst_tick = ticker.ticks[0] if ticker.ticks else None
    result: dict[str, Any] = {
        "due": due,
        "handed": rig.invoker.handed,
        "tick_errors": [repr(e) for e in ticker.errors],
        "tick_seconds": burst_tick.seconds if burst_tick else None,
        "tick_late_seconds": burst_tick.started - burst_tick.second if burst_tick else None,
        "dispatch_seconds": _since(burst_tick.started if burst_tick else None, rig.invoker.last_handed_at),
        "tick": tick_summary(burst_tick.result if burst_tick else None),
        "other_ticks": [tick_summary(t.result) for t in ticker.ticks[1:]],
        "drained": drained,
    }
    if rig.executors is None:
        return result
    arrivals = target.take()
    with ws.connect() as conn:
        send_lags = tickwork_send_lags(conn, "bench", (due, due))
        result["statuses"] = tickwork_statuses(conn, "bench", (due, due))
    deliveries = summarize(arrivals, set(job_ids), (due, due), 1, send_lags)
    result["deliveries"] = deliveries.as_dict()
    result["all_arrived_after_due_seconds"] = _since(due, deliveries.last_arrival)
    result["all_arrived_after_tick_seconds"] = _since(burst_tick.started if burst_tick else None,
                                                      deliveries.last_arrival)
    result["target_connections"] = target.connections()
    return result


def _since(start: float | None, end: float | None) -> float | None:
    return None if start is None or end is None else end - start
