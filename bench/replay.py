"""Replay (issue 25): a tenant replaying 10,000 failed runs stays within its pace and does not move another
tenant's steady load.

Two tenants made through the admin event, every job created through the API (bench/tenants.py). Tenant B
runs B_JOBS every-second jobs against the bench target. Tenant A has one job whose RUNS failed runs (one a
minute back from now, a week of an every-minute job) are written to Postgres as the executors leave them.
One run, two windows:

1. **B alone** (BASELINE_SECONDS): the baseline;
2. **B while A replays** its RUNS runs with `POST /jobs/{id}/replay`, paced at `rate` a second
   (TICKWORK_REPLAY_PER_SECOND; `--replay-rate`): the window lasts until the last replayed run's instant.

For A: runs delivered (each once), the busiest second's arrivals against the pace, first to last arrival
against (RUNS - 1) / rate, and whether they arrived in slot order. For B: as bench/noisy.py, send lag p99
within GOAL_LAG_RATIO of its baseline, no run missed or lost.
"""
from __future__ import annotations

import bisect
import math
import time
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

from bench.harness import SecondTicker, Servers, Workspace, sleep_until, tick_stats
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
# A second's arrivals may exceed the pace by this much: runs of one poller tick are handed over together and
# leave at their own instants, but a target's clock reads whole requests.
PACE_TOLERANCE = 1.1


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
    b_key, a_key = api.create_tenant("tenant-b"), api.create_tenant("tenant-a")
    for i in range(1, b_jobs + 1):
        api.require(b_key, "POST", "/jobs", b_job(i, target.url, t0 * 1000))
    a_job = api.require(a_key, "POST", "/jobs", {"name": "a-replayed", "schedule": "0 0 0 1 1 *",
                                                 "request": {"method": "POST", "url": target.url}})
    since = _failed_runs(ws, a_job["id"], runs)
    ticker = SecondTicker(rig.tick, t0 - 2, end - 2, TICK_OFFSET_MS / 1000).start()
    sleep_until(t1 - 1)
    asked = time.time()
    reply = api.call(a_key, "POST", f"/jobs/{a_job['id']}/replay",
                     {"since": rfc3339(since), "until": rfc3339(from_ms(int(asked * 1000)))})
    answered = time.time() - asked
    sleep_until(t1 + GRACE_SECONDS)
    alone = _b_figures(ws, (t0, t1 - 2), b_jobs)
    ticker.join()
    sleep_until(end + 1 + GRACE_SECONDS)
    busy = _b_figures(ws, (t1, end), b_jobs)
    arrivals = target.take()
    alone.update(_delivered(arrivals, alone))
    busy.update(_delivered(arrivals, busy))
    return {"alone": _b_window(alone), "replaying": _b_window(busy),
            "replay": {"status": reply.status, "answer": {k: (reply.body or {}).get(k) for k in
                                                          ("count", "first_at", "last_at", "error")},
                       "answered_seconds": answered, **pace(arrivals, a_job["id"], rate),
                       "statuses": _statuses(ws, a_job["id"])},
            "ticks": tick_stats([t.seconds for t in ticker.ticks], end - t0 + 1),
            "tick_errors": [repr(e) for e in ticker.errors][:3]}


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


def pace(arrivals: list[Arrival], job_id: str, rate: int) -> dict[str, Any]:
    """A's replayed runs as the target saw them: delivered (distinct runs) and duplicates, the most in any
    one second against the pace, first to last, and arrivals out of slot order."""
    mine = sorted((a for a in arrivals if a.job_id == job_id), key=lambda a: a.at)
    times = [a.at for a in mine]
    busiest = max((bisect.bisect_left(times, t + 1.0) - i for i, t in enumerate(times)), default=0)
    slots = [a.scheduled_for for a in mine]
    out_of_order = sum(1 for earlier, later in zip(slots, slots[1:]) if later < earlier)
    runs = len({a.run_id for a in mine})
    return {"delivered": runs, "duplicates": len(mine) - runs, "busiest_second": busiest,
            "within_pace": busiest <= rate * PACE_TOLERANCE, "span_seconds": times[-1] - times[0] if times else None,
            "paced_span_seconds": (runs - 1) / rate if runs else None, "out_of_order": out_of_order}


def rows(r: dict[str, Any]) -> list[tuple[str, ...]]:
    p, rp = r["plan"], r["replay"]
    answer = rp["answer"]
    span = "n/a" if rp["span_seconds"] is None else f"{rp['span_seconds']:.1f} s"
    return [
        (f"Replay: tenant B, {p['b_jobs']} jobs every second, alone for {p['baseline_seconds']} s (baseline column), "
         f"then while tenant A replays {p['runs']:,} failed runs at {p['rate']} a second (Tickwork column); "
         f"{mode(r['executor_processes'])}",),
        *_b_rows(r["alone"], r["replaying"]),
        ("A: POST /jobs/{id}/replay answered", f"{rp['status']} in {rp['answered_seconds']:.2f} s: count "
                                                f"{answer.get('count')}, {answer.get('first_at')} → {answer.get('last_at')}"),
        ("A: replayed runs delivered / duplicates / out of slot order",
         f"{rp['delivered']:,} / {rp['duplicates']:,} / {rp['out_of_order']:,}"),
        ("A: busiest second's arrivals; first → last arrival",
         f"{rp['busiest_second']} (pace {p['rate']}: {'within' if rp['within_pace'] else 'OVER'}); {span} "
         f"(paced: {rp['paced_span_seconds'] or 0:.1f} s)"),
        ("A: its runs by status after", ", ".join(f"{k} {v:,}" for k, v in sorted(rp["statuses"].items()))),
        ("ticks run / due", f"{r['ticks']['count']} / {r['ticks']['expected']}"),
    ]
