"""Replay (issue 25): a tenant replaying 10,000 failed runs stays within its pace and does not move another
tenant's steady load.

Two tenants made through the admin event, every job created through the API (bench/tenants.py). Tenant B
runs B_JOBS every-second jobs against the bench target. Tenant A has one job whose RUNS failed runs (one a
minute back from now, a week of an every-minute job) are written to Postgres as the executors leave them.
One run, ROUNDS rounds and a last window, so that load which comes and goes on a shared machine falls on
both columns alike (a machine stall makes every run of its second late, and B's p99 is its worst half
second or so: in one long window of each, where a stall fell decided the verdict):

1. **B alone** (BASELINE_SECONDS);
2. **B while A replays** RUNS / ROUNDS of its runs with one `POST /jobs/{id}/replay`, paced at `rate` a
   second (TICKWORK_REPLAY_PER_SECOND; `--replay-rate`): the window lasts until that batch's last instant;
   then GAP_SECONDS left out of both columns (A's last runs may still be on their way);

and after the last round **B alone** again. The baseline column is the alone windows together, the other
the replay windows together; each round's replay window is also set beside the alone windows on either side
of it (its ratio), and the ratios' median and range are shown beside the verdict, which is on the pooled p99s.

For A: runs delivered (each once), each run's arrival behind its paced instant (the pace is kept when none is
ahead of it), the busiest second's arrivals beside the pace, first to last arrival of each batch against
(its runs - 1) / rate, whether they arrived in slot order, and how many arrived inside B's alone windows (none
should). For B: as bench/noisy.py, send lag p99 within GOAL_LAG_RATIO of its baseline, no run missed or lost.
"""
from __future__ import annotations

import bisect
import math
import time
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Any

from bench.harness import SecondTicker, Servers, Workspace, parse_when, percentile, sleep_until, tick_stats
from bench.outcome import summarize
# B's jobs and figures are the noisy-neighbour benchmark's: the same load, measured the same way.
from bench.noisy import (
    GOAL_LAG_RATIO,
    GRACE_SECONDS,
    SETUP_MARGIN_SECONDS,
    SETUP_SECONDS_PER_JOB,
    _b_figures,
    _b_rows,
    _b_window,
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
# Five rounds of 2,000 runs (10 s each at RATE) beside six alone windows of 10 s: about as many of B's runs
# in each column. `--replay-rounds 1`: one request of RUNS, alone before and after (the shape before).
ROUNDS = 5
BASELINE_SECONDS = 10
# After a replay window, before the next alone one: A's runs sent late by a stall are still arriving.
GAP_SECONDS = 3
DRAIN_TIMEOUT_SECONDS = 60
# The pace is kept when no replayed run is sent ahead of its paced instant (first_at + i / rate). An arrival
# this far ahead of it was sent early (one clock: the target's and the executors'). The busiest second of
# arrivals is shown beside it, not judged: runs sent late (a machine stall) arrive together with the next
# ones, so a second of arrivals may hold the instants of 1 s plus the lag (at most rate x (1 + max lag)).
EARLY_MS = -1.0


def run(servers: Servers, target: Target, workers: int, db_pool: int, processes: int, rate: int = RATE,
        runs: int = RUNS, b_jobs: int = B_JOBS, baseline_seconds: int = BASELINE_SECONDS,
        rounds: int = ROUNDS) -> dict[str, Any]:
    with Workspace(servers, "replay") as ws:
        ws.settings = replace(ws.settings, max_runs_in_flight=DEFAULT_MAX_RUNS_IN_FLIGHT, replay_per_second=rate)
        rig = TickworkRig(ws, workers, db_pool, executor_processes=processes)
        api = InProcessApi(ws.services(db_pool_size=2))
        try:
            warm_up(ws, rig, target)
            result = _windows(ws, rig, api, target, Plan(rate, runs, b_jobs, baseline_seconds, rounds))
        finally:
            drained = rig.drain(DRAIN_TIMEOUT_SECONDS)
            api.close()
            rig.close()
    return {"plan": {"rate": rate, "runs": runs, "b_jobs": b_jobs, "baseline_seconds": baseline_seconds,
                     "rounds": rounds},
            "executor_processes": processes, **result, "drained_after": drained}


@dataclass(frozen=True)
class Plan:
    rate: int
    runs: int
    b_jobs: int
    baseline_seconds: int
    rounds: int

    def batches(self) -> list[int]:
        """How many runs each round replays: RUNS shared out, the first rounds taking what does not divide."""
        return [self.runs // self.rounds + (1 if i < self.runs % self.rounds else 0) for i in range(self.rounds)]


@dataclass(frozen=True)
class Timeline:
    """B's windows in epoch seconds (inclusive): alone before each round and after the last, and each round's
    replay (asked for the second before it begins)."""

    alone: list[tuple[int, int]]
    replaying: list[tuple[int, int]]

    @property
    def last(self) -> int:
        return self.alone[-1][1]


def timeline(start: int, plan: Plan) -> Timeline:
    alone, replaying = [], []
    for count in plan.batches():
        alone.append((start, start + plan.baseline_seconds - 1))
        first = start + plan.baseline_seconds + 1
        end = first + math.ceil(count / plan.rate + replay_lead(count).total_seconds()) + 1  # its last instant
        replaying.append((first, end))
        start = end + GAP_SECONDS
    alone.append((start, start + plan.baseline_seconds - 1))
    return Timeline(alone, replaying)


def _windows(ws: Workspace, rig: TickworkRig, api: InProcessApi, target: Target, plan: Plan) -> dict[str, Any]:
    t0 = int(time.time() + SETUP_MARGIN_SECONDS + (plan.b_jobs + 1) * SETUP_SECONDS_PER_JOB) + 3
    when = timeline(t0, plan)
    b_key, a_key = api.create_tenant("tenant-b"), api.create_tenant("tenant-a")
    for i in range(1, plan.b_jobs + 1):
        api.require(b_key, "POST", "/jobs", b_job(i, target.url, t0 * 1000))
    a_job = api.require(a_key, "POST", "/jobs", {"name": "a-replayed", "schedule": "0 0 0 1 1 *",
                                                 "request": {"method": "POST", "url": target.url}})
    since = _failed_runs(ws, a_job["id"], plan.runs)
    ticker = SecondTicker(rig.tick, t0 - 2, when.last - 2, TICK_OFFSET_MS / 1000).start()
    asks = _replay_rounds(api, a_key, a_job["id"], since, plan, when)
    ticker.join()
    sleep_until(when.last + 1 + GRACE_SECONDS)
    arrivals = target.take()
    alone = _b_in(ws, plan.b_jobs, arrivals, when.alone)
    busy = _b_in(ws, plan.b_jobs, arrivals, when.replaying)
    mine = [a for a in arrivals if a.job_id == a_job["id"]]
    return {"alone": _b_window(alone), "replaying": _b_window(busy),
            "alone_spans": [list(span) for span in when.alone], "replay_spans": [list(span) for span in when.replaying],
            "rounds": round_ratios(ws, plan.b_jobs, when),
            "replay": {"asks": [ask["summary"] for ask in asks],
                       **paced(mine, a_job["id"], plan.rate, [(ask["since"], ask["first_at"]) for ask in asks]),
                       "in_alone_windows": _inside(mine, when.alone),
                       "statuses": _statuses(ws, a_job["id"])},
            "ticks": tick_stats([t.seconds for t in ticker.ticks], when.last - t0 + 1),
            "tick_errors": [repr(e) for e in ticker.errors][:3]}


def _replay_rounds(api: InProcessApi, a_key: str, job_id: str, since: datetime, plan: Plan,
                   when: Timeline) -> list[dict[str, Any]]:
    """Each round's request, the second before its replay window: its slots from `since` on, in order."""
    asks = []
    for count, (first, _) in zip(plan.batches(), when.replaying):
        until = since + timedelta(minutes=count)
        sleep_until(first - 1)
        asked = time.time()
        reply = api.call(a_key, "POST", f"/jobs/{job_id}/replay", {"since": rfc3339(since), "until": rfc3339(until)})
        body = reply.body or {}
        asks.append({"since": since.timestamp(), "first_at": _epoch(body.get("first_at")),
                     "summary": {"status": reply.status, "answered_seconds": time.time() - asked,
                                 **{k: body.get(k) for k in ("count", "first_at", "last_at", "error")}}})
        since = until
    return asks


def _b_in(ws: Workspace, b_jobs: int, arrivals: list[Arrival], spans: list[tuple[int, int]]) -> dict[str, Any]:
    """B's figures over these windows together."""
    figures = _pooled([_b_figures(ws, span, b_jobs) for span in spans])
    figures.update(_delivered_in(arrivals, figures, spans))
    return figures


def round_ratios(ws: Workspace, b_jobs: int, when: Timeline) -> dict[str, Any]:
    """Each round's B send lag p99 while A replays against the alone windows on either side of it: the ratios,
    their median and range (how much the machine moved them)."""
    p99s = []
    for i, span in enumerate(when.replaying):
        alone = [lag for w in when.alone[i:i + 2] for lag in _b_figures(ws, w, b_jobs)["send_lags"]]
        p99s.append((percentile(_b_figures(ws, span, b_jobs)["send_lags"], 99), percentile(alone, 99)))
    ratios = sorted(busy / alone for busy, alone in p99s if busy is not None and alone)
    return {"p99_ms": [list(pair) for pair in p99s], "ratios": [busy / alone if busy is not None and alone else None
                                                              for busy, alone in p99s],
            "median": ratios[len(ratios) // 2] if ratios else None,
            "min": ratios[0] if ratios else None, "max": ratios[-1] if ratios else None,
            "within_goal": sum(1 for r in ratios if r <= GOAL_LAG_RATIO)}


def _inside(arrivals: list[Arrival], spans: list[tuple[int, int]]) -> int:
    return sum(1 for a in arrivals if any(lo <= a.at < hi + 1 for lo, hi in spans))


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
    """A's replayed runs as the target saw them, one batch: delivered (distinct runs) and duplicates, the most in
    any one second against the pace, first to last, arrivals out of slot order, and (given the batch's first
    instant) each first arrival's lag behind its paced instant (the i-th slot goes at first_at + i / rate)."""
    return paced(arrivals, job_id, rate, [(None, first_at)])


def paced(arrivals: list[Arrival], job_id: str, rate: int,
          batches: list[tuple[float | None, float | None]]) -> dict[str, Any]:
    """As pace, for batches replayed one after the other, each given as (its first slot, epoch seconds; None for
    the first batch: every slot; its first instant): a run belongs to the last batch whose first slot is at or
    before its own."""
    mine = sorted((a for a in arrivals if a.job_id == job_id), key=lambda a: a.at)
    times = [a.at for a in mine]
    busiest = max((bisect.bisect_left(times, t + 1.0) - i for i, t in enumerate(times)), default=0)
    slots = [a.scheduled_for for a in mine]
    out_of_order = sum(1 for earlier, later in zip(slots, slots[1:]) if later < earlier)
    runs = len({a.run_id for a in mine})
    parts = _by_batch(mine, [since for since, _ in batches])
    lags = _paced_lags(parts, rate, [first_at for _, first_at in batches])
    spans = [part[-1].at - part[0].at for part in (sorted(p, key=lambda a: a.at) for p in parts) if part]
    counts = [len({a.run_id for a in part}) for part in parts]
    return {"delivered": runs, "lag_ms": lags, "duplicates": len(mine) - runs, "busiest_second": busiest,
            "within_pace": lags is not None and lags["early"] == 0,
            "span_seconds": sum(spans) if spans else None,
            "paced_span_seconds": sum(n - 1 for n in counts if n) / rate if runs else None, "out_of_order": out_of_order}


def _by_batch(mine: list[Arrival], starts: list[float | None]) -> list[list[Arrival]]:
    parts: list[list[Arrival]] = [[] for _ in starts]
    bounds = [float("-inf") if since is None else since for since in starts]
    for a in mine:
        parts[max(bisect.bisect_right(bounds, parse_when(a.scheduled_for)) - 1, 0)].append(a)
    return parts


def _paced_lags(parts: list[list[Arrival]], rate: int, first_ats: list[float | None]) -> dict[str, float] | None:
    if any(first_at is None for first_at in first_ats) or not any(parts):
        return None
    lags = []
    for part, first_at in zip(parts, first_ats):
        first: dict[str, Arrival] = {}
        for a in part:
            first.setdefault(a.run_id, a)
        by_slot = sorted(first.values(), key=lambda a: a.scheduled_for)
        lags += [(a.at - (first_at + i / rate)) * 1000 for i, a in enumerate(by_slot)]  # type: ignore[operator]
    lags.sort()
    return {"early": bisect.bisect_left(lags, EARLY_MS), "min": lags[0], "p50": lags[len(lags) // 2],
            "p99": lags[min(len(lags) - 1, int(len(lags) * 0.99))], "max": lags[-1]}


def rows(r: dict[str, Any]) -> list[tuple[str, ...]]:
    p, rp, rd = r["plan"], r["replay"], r["rounds"]
    span = "n/a" if rp["span_seconds"] is None else f"{rp['span_seconds']:.1f} s"
    return [
        (f"Replay: tenant B, {p['b_jobs']} jobs every second, alone in {p['rounds'] + 1} windows of "
         f"{p['baseline_seconds']} s (baseline column), between which tenant A replays {p['runs']:,} failed runs "
         f"in {p['rounds']} request{'s' if p['rounds'] != 1 else ''} at {p['rate']} a second (Tickwork column: those windows together); "
         f"{mode(r['executor_processes'])}",),
        *_b_rows(r["alone"], r["replaying"]),
        ("B send lag p99 per round, replaying ÷ alone on either side; median (range)",
         ", ".join("n/a" if x is None else f"{x:.2f}x" for x in rd["ratios"]), "", "",
         "n/a" if rd["median"] is None else
         f"{rd['median']:.2f}x ({rd['min']:.2f}-{rd['max']:.2f}x), {rd['within_goal']} of {len(rd['ratios'])} within"),
        ("A: POST /jobs/{id}/replay answered", "; ".join(
            f"{a['status']} in {a['answered_seconds']:.2f} s, count {a.get('count')}" for a in rp["asks"])),
        ("A: replayed runs delivered / duplicates / out of slot order",
         f"{rp['delivered']:,} / {rp['duplicates']:,} / {rp['out_of_order']:,}"),
        ("A: arrival lag behind its paced instant min / p50 / p99 / max; sent early",
         "n/a" if not rp.get("lag_ms") else " / ".join(f"{rp['lag_ms'][k]:.1f} ms" for k in ("min", "p50", "p99", "max"))
         + f"; {rp['lag_ms']['early']}", "", "", f"none early (within its pace): {'met' if rp['within_pace'] else 'MISSED'}"),
        ("A: busiest second's arrivals; first → last arrival of each request, together",
         f"{rp['busiest_second']} (pace {p['rate']}); {span} (paced: {rp['paced_span_seconds'] or 0:.1f} s)"),
        ("A: arrivals inside B's alone windows", f"{rp['in_alone_windows']:,}"),
        ("A: its runs by status after", ", ".join(f"{k} {v:,}" for k, v in sorted(rp["statuses"].items()))),
        ("ticks run / due", f"{r['ticks']['count']} / {r['ticks']['expected']}"),
    ]
