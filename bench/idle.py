"""Idle tick cost (nothing due), and a poller's memory with 100,000 jobs scheduled.

The poller keeps no jobs in memory: they live in Redis (the due set and the specs hash), so its RSS
is measured in a fresh process that only builds its Services and ticks, after the jobs were indexed.
Redis memory for the same jobs is reported next to it, for Tickwork's two keys and the baseline's set.
(Rebuilding the index after Redis lost it is bench/rebuild.py.)
"""
from __future__ import annotations

import multiprocessing
import time
from typing import Any

from bench.baseline_0cron import Baseline
from bench.harness import (
    ONCE_A_DAY,
    RecordingInvoker,
    Servers,
    Workspace,
    capture_logs,
    create_jobs,
    lag_summary,
    mark_built,
)
from bench.rig import tick_summary
from tickwork.dispatch.poller import Poller
from tickwork.dueindex.index import DueIndex

IDLE_TICKS = 50
CHILD_TIMEOUT_SECONDS = 120
# Far enough ahead that nothing comes due while measuring.
FUTURE_SECONDS = 3600
UNREACHABLE_URL = "http://127.0.0.1:9/never"


def _timed_ticks(tick: Any, count: int) -> tuple[list[float], Any]:
    durations, last = [], None
    for _ in range(count):
        started = time.perf_counter()
        last = tick(int(time.time() * 1000))
        durations.append((time.perf_counter() - started) * 1000)
    return durations, last


def _ms(durations: list[float]) -> dict[str, Any]:
    summary = lag_summary(durations)
    return {"p50_ms": summary["p50"], "p99_ms": summary["p99"], "max_ms": summary["max"]}


def _memory_kib() -> dict[str, int]:
    found = {}
    with open("/proc/self/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                found[name] = int(value.split()[0])
    return found


def _poller_process(conn: Any, settings: Any, ticks: int) -> None:
    """A fresh poller: build Services, tick idle, report RSS."""
    from tickwork.wiring import build_services

    capture_logs()  # warnings go to the tally, not over the parent's output
    report: dict[str, Any] = {"before_services": _memory_kib()}
    svc = build_services(settings, invoker=RecordingInvoker(), db_pool_size=1)
    poller = Poller(svc)
    durations, last = _timed_ticks(poller.tick, ticks)
    report.update(idle=_ms(durations), tick=tick_summary(last), after_ticks=_memory_kib())
    svc.close()
    conn.send(report)


def _in_child(settings: Any, ticks: int) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    process = ctx.Process(target=_poller_process, args=(child, settings, ticks), name="bench-poller")
    process.start()
    try:
        if not parent.poll(CHILD_TIMEOUT_SECONDS):
            raise RuntimeError("poller process did not report in time")
        return parent.recv()
    finally:
        process.join(10)
        if process.is_alive():
            process.terminate()


def _redis_bytes(ws: Workspace, *keys: str) -> int:
    return sum(int(ws.redis.memory_usage(key, samples=0) or 0) for key in keys)


def run(servers: Servers, jobs: int) -> dict[str, Any]:
    with Workspace(servers, "idle") as ws:
        svc = ws.services(invoker=RecordingInvoker(), db_pool_size=1)
        index = DueIndex(svc.redis, ws.namespace)
        mark_built(index, int(time.time() * 1000))
        poller = Poller(svc)
        _timed_ticks(poller.tick, 5)  # warm: scripts loaded, connections open
        empty, last_empty = _timed_ticks(poller.tick, IDLE_TICKS)
        future_ms = (int(time.time()) + FUTURE_SECONDS) * 1000
        started = time.perf_counter()
        job_ids = create_jobs(ws, jobs, ONCE_A_DAY, future_ms, UNREACHABLE_URL, "bench")
        setup_seconds = time.perf_counter() - started
        full, last_full = _timed_ticks(poller.tick, IDLE_TICKS)
        base = Baseline(ws, workers=1, db_pool_size=1)
        try:
            base.schedule(job_ids, future_ms // 1000)
            base_durations, _ = _timed_ticks(base.poll, IDLE_TICKS)
            base_bytes = _redis_bytes(ws, base.key)
        finally:
            base.close()
        return {
            "jobs": jobs, "setup_seconds": setup_seconds,
            "tickwork_empty": {**_ms(empty), "tick": tick_summary(last_empty)},
            "tickwork_full": {**_ms(full), "tick": tick_summary(last_full)},
            "baseline_full": {**_ms(base_durations), "redis_round_trips": 1},
            "tickwork_redis_bytes": _redis_bytes(ws, index.due_key, index.specs_key),
            "baseline_redis_bytes": base_bytes,
            "poller_process": _in_child(ws.settings, IDLE_TICKS),
        }

