"""Replay (issue 25): a tenant replaying 10,000 failed runs stays within its pace and does not move another
tenant's steady load.

Two tenants made through the admin event, every job created through the API (bench/tenants.py). Tenant B
runs B_JOBS every-second jobs against the bench target. Tenant A has one job whose RUNS failed runs (one a
minute back from now, a week of an every-minute job) are written to Postgres as the executors leave them.
One run, three windows:

1. **B alone** (BASELINE_SECONDS);
2. **B while A replays** its RUNS runs with `POST /jobs/{id}/replay`, paced at `rate` a second
   (TICKWORK_REPLAY_PER_SECOND; `--replay-rate`): the window lasts until the last replayed run's instant;
3. **B alone** again (BASELINE_SECONDS): the baseline is windows 1 and 3 together, so other load on a shared
   machine that comes or goes during the run weighs on both columns.

For A: runs delivered (each once), each run's arrival behind its paced instant (the pace is kept when none is
ahead of it), the busiest second's arrivals beside the pace, first to last arrival against (RUNS - 1) / rate, and whether they
arrived in slot order. For B: as bench/noisy.py, send lag p99
within GOAL_LAG_RATIO of its baseline, no run missed or lost.
"""
from __future__ import annotations

import bisect
import math
import time
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

from bench.harness import SecondTicker, Servers, Workspace, parse_when, sleep_until, tick_stats
from bench.outcome import summarize
# B's jobs and figures are the noisy-neighbour benchmark's: the same load, measured the same way.
from bench.noisy import (
    GRACE_SECONDS,
    SETUP_MARGIN_SECONDS,
    SETUP_SECONDS_PER_JOB,
    _b_figures,
    _b_rows,
    _b_window,
    _delivered,
    b_job,
)
from bench.report import mode
from bench.rig import TickworkRig, warm_up
from bench.target import Arrival, Target
from bench.tenants import InProcessApi
from tickwork.dispatch.poller import TICK_OFFSET_MS
from tickwork.rules.replay import lead as replay_lead
from tickwork.settings import DEFAULT_MAX_RUNS_IN_FLIGHT
from tickwork.timeutil import from_ms, rfc3339

B_JOBS = 100
RUNS = 10_000
# The bench's pace: 20 times the default, so the replay of 10,000 runs takes 50 s instead of 17 minutes, and
# the replay's load on the engine is 2x B's (100 runs a second) rather than a tenth of it.
RATE = 200
BASELINE_SECONDS = 15
DRAIN_TIMEOUT_SECONDS = 60
# The pace is kept when no replayed run is sent ahead of its paced instant (first_at + i / rate). An arrival
# this far ahead of it was sent early (one clock: the target's and the executors'). The busiest second of
# arrivals is shown beside it, not judged: runs sent late (a machine stall) arrive together with the next
# ones, so a second of arrivals may hold the instants of 1 s plus the lag (at most rate x (1 + max lag)).
EARLY_MS = -1.0


def run(servers: Servers, target: Target, workers: int, db_pool: int, processes: int, rate: int = RATE,
        runs: int = RUNS, b_jobs: int = B_JOBS, baseline_seconds: int = BASELINE_SECONDS) -> dict[str, Any]:
    with Workspace(servers, "replay") as ws:
        ws.settings = replace(ws.settings, max_runs_in_flight=DEFAULT_MAX_RUNS_IN_FLIGHT, replay_per_second=rate)
        rig = TickworkRig(ws, workers, db_pool, executor_processes=processes)
        api = InProcessApi(ws.services(db_pool_size=2))
        try:
            warm_up(ws, rig, target)
            result = _windows(ws, rig, api, target, rate, runs, b_jobs, baseline_seconds)
        finally:
            drained = rig.drain(DRAIN_TIMEOUT_SECONDS)
            api.close()
            rig.close()
    return {"plan": {"rate": rate, "runs": runs, "b_jobs": b_jobs, "baseline_seconds": baseline_seconds},
            "executor_processes": processes, **result, "drained_after": drained}


def _windows(ws: Workspace, rig: TickworkRig, api: InProcessApi, target: Target, rate: int, runs: int, b_jobs: int,
             baseline_seconds: int) -> dict[str, Any]:
    t0 = int(time.time() + SETUP_MARGIN_SECONDS + (b_jobs + 1) * SETUP_SECONDS_PER_JOB) + 3
    t1 = t0 + baseline_seconds + 1
    end = t1 + math.ceil(runs / rate + replay_lead(runs).total_seconds()) + 1  # the last replay's instant
    t2 = end + 2  # B alone again: the baseline is both alone windows, so a machine that got busier (or quieter)
    t3 = t2 + baseline_seconds - 1  # during the replay weighs on both columns alike
    b_key, a_key = api.create_tenant("tenant-b"), api.create_tenant("tenant-a")
    for i in range(1, b_jobs + 1):
        api.require(b_key, "POST", "/jobs", b_job(i, target.url, t0 * 1000))
    a_job = api.require(a_key, "POST", "/jobs", {"name": "a-replayed", "schedule": "0 0 0 1 1 *",
                                                 "request": {"method": "POST", "url": target.url}})
    since = _failed_runs(ws, a_job["id"], runs)
    ticker = SecondTicker(rig.tick, t0 - 2, t3 - 2, TICK_OFFSET_MS / 1000).start()
    sleep_until(t1 - 1)
    asked = time.time()
    reply = api.call(a_key, "POST", f"/jobs/{a_job['id']}/replay",
                     {"since": rfc3339(since), "until": rfc3339(from_ms(int(asked * 1000)))})
    answered = time.time() - asked
    ticker.join()
    sleep_until(t3 + 1 + GRACE_SECONDS)
    spans = [(t0, t1 - 2), (t2, t3)]
    alone = _pooled([_b_figures(ws, span, b_jobs) for span in spans])
    busy = _b_figures(ws, (t1, end), b_jobs)
    arrivals = target.take()
    alone.update(_delivered_in(arrivals, alone, spans))
    busy.update(_delivered(arrivals, busy))
    return {"alone": _b_window(alone), "replaying": _b_window(busy),
            "alone_spans": [list(span) for span in spans],
            "replay": {"status": reply.status, "answer": {k: (reply.body or {}).get(k) for k in
                                                          ("count", "first_at", "last_at", "error")},
                       "answered_seconds": answered,
                       **pace(arrivals, a_job["id"], rate, _epoch((reply.body or {}).get("first_at"))),
                       "statuses": _statuses(ws, a_job["id"])},
            "ticks": tick_stats([t.seconds for t in ticker.ticks], t3 - t0 + 1),
            "tick_errors": [repr(e) for e in ticker.errors][:3]}


def _pooled(windows: list[dict[str, Any]]) -> dict[str, Any]:
    """B's figures of several windows as one: expected, statuses and send lags added up."""
    statuses: dict[str, int] = {}
    for w in windows:
        for status, count in w["statuses"].items():
            statuses[status] = statuses.get(status, 0) + count
    return {"span": (windows[0]["span"][0], windows[-1]["span"][1]), "job_ids": windows[0]["job_ids"],
            "expected": sum(w["expected"] for w in windows), "statuses": statuses,
            "send_lags": [lag for w in windows for lag in w["send_lags"]]}


def _delivered_in(arrivals: list[Arrival], figures: dict[str, Any], spans: list[tuple[int, int]]) -> dict[str, Any]:
    """As noisy._delivered, over the slots of several spans."""
    inside = [a for a in arrivals if any(lo - 1e-3 <= parse_when(a.scheduled_for) <= hi + 1e-3 for lo, hi in spans)]
    per_job = sum(hi - lo + 1 for lo, hi in spans)
    return {"deliveries": summarize(inside, figures["job_ids"], figures["span"], per_job,
                                    figures["send_lags"]).as_dict()}


def _failed_runs(ws: Workspace, job_id: str, runs: int) -> datetime:
    """`runs` failed runs of the job, one a minute back from now (one attempt each, as after a 503); returns
    the first one's slot."""
    first = datetime.now(timezone.utc).replace(second=0, microsecond=0) - timedelta(minutes=runs)
    with ws.connect() as conn:
        conn.execute(
            "INSERT INTO executions (id, tenant_id, job_id, scheduled_for, trigger, status, attempt_count, started_at,"
            " finished_at, last_error)"
            " SELECT gen_random_uuid(), j.tenant_id, j.id, %(first)s + make_interval(mins => n), 'schedule', 'failed',"
            " 1, %(first)s + make_interval(mins => n), %(first)s + make_interval(mins => n), 'HTTP 503'"
            " FROM jobs j, generate_series(0, %(runs)s - 1) AS n WHERE j.id = %(job)s",
            {"first": first, "runs": runs, "job": job_id})
    return first


def _statuses(ws: Workspace, job_id: str) -> dict[str, int]:
    with ws.connect() as conn:
        return {row[0]: int(row[1]) for row in conn.execute(
            "SELECT status, count(*) FROM executions WHERE job_id = %s GROUP BY status", (job_id,))}


def _epoch(at: str | None) -> float | None:
    return None if at is None else datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()


def pace(arrivals: list[Arrival], job_id: str, rate: int, first_at: float | None = None) -> dict[str, Any]:
    """A's replayed runs as the target saw them: delivered (distinct runs) and duplicates, the most in any
    one second against the pace, first to last, arrivals out of slot order, and (given the batch's first
    instant) each first arrival's lag behind its paced instant (the i-th slot goes at first_at + i / rate)."""
    mine = sorted((a for a in arrivals if a.job_id == job_id), key=lambda a: a.at)
    times = [a.at for a in mine]
    busiest = max((bisect.bisect_left(times, t + 1.0) - i for i, t in enumerate(times)), default=0)
    slots = [a.scheduled_for for a in mine]
    out_of_order = sum(1 for earlier, later in zip(slots, slots[1:]) if later < earlier)
    runs = len({a.run_id for a in mine})
    lags = _paced_lags(mine, rate, first_at)
    return {"delivered": runs, "lag_ms": lags, "duplicates": len(mine) - runs, "busiest_second": busiest,
            "within_pace": lags is not None and lags["early"] == 0,
            "span_seconds": times[-1] - times[0] if times else None,
            "paced_span_seconds": (runs - 1) / rate if runs else None, "out_of_order": out_of_order}


def _paced_lags(mine: list[Arrival], rate: int, first_at: float | None) -> dict[str, float] | None:
    if first_at is None or not mine:
        return None
    first: dict[str, Arrival] = {}
    for a in mine:
        first.setdefault(a.run_id, a)
    by_slot = sorted(first.values(), key=lambda a: a.scheduled_for)
    lags = sorted((a.at - (first_at + i / rate)) * 1000 for i, a in enumerate(by_slot))
    return {"early": bisect.bisect_left(lags, EARLY_MS), "min": lags[0], "p50": lags[len(lags) // 2], "p99": lags[min(len(lags) - 1, int(len(lags) * 0.99))],
            "max": lags[-1]}


def rows(r: dict[str, Any]) -> list[tuple[str, ...]]:
    p, rp = r["plan"], r["replay"]
    answer = rp["answer"]
    span = "n/a" if rp["span_seconds"] is None else f"{rp['span_seconds']:.1f} s"
    return [
        (f"Replay: tenant B, {p['b_jobs']} jobs every second, alone for {p['baseline_seconds']} s before and "
         f"{p['baseline_seconds']} s after (baseline column), "
         f"then while tenant A replays {p['runs']:,} failed runs at {p['rate']} a second (Tickwork column); "
         f"{mode(r['executor_processes'])}",),
        *_b_rows(r["alone"], r["replaying"]),
        ("A: POST /jobs/{id}/replay answered", f"{rp['status']} in {rp['answered_seconds']:.2f} s: count "
                                                f"{answer.get('count')}, {answer.get('first_at')} → {answer.get('last_at')}"),
        ("A: replayed runs delivered / duplicates / out of slot order",
         f"{rp['delivered']:,} / {rp['duplicates']:,} / {rp['out_of_order']:,}"),
        ("A: arrival lag behind its paced instant min / p50 / p99 / max; sent early",
         "n/a" if not rp.get("lag_ms") else " / ".join(f"{rp['lag_ms'][k]:.1f} ms" for k in ("min", "p50", "p99", "max"))
         + f"; {rp['lag_ms']['early']}", "", "", f"none early (within its pace): {'met' if rp['within_pace'] else 'MISSED'}"),
        ("A: busiest second's arrivals; first → last arrival",
         f"{rp['busiest_second']} (pace {p['rate']}); {span} (paced: {rp['paced_span_seconds'] or 0:.1f} s)"),
        ("A: its runs by status after", ", ".join(f"{k} {v:,}" for k, v in sorted(rp["statuses"].items()))),
        ("ticks run / due", f"{r['ticks']['count']} / {r['ticks']['expected']}"),
    ]
