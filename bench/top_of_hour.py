"""Top of the hour: N jobs share one cron instant, created well ahead of it, as real users' jobs are.

Their schedule is hourly at a chosen minute and second (`S M * * * *`: the shape of `0 0 * * * *`, with
the instant moved to a few seconds after the jobs are written, so the benchmark need not wait for a real
top of the hour). The jobs are written and indexed LEAD_SECONDS ahead, then the poller ticks at half past
every second, as in production, from then until just after the instant: it sees the instant coming for
as long as its lookahead lets it. Reported at the target: send lag p50 / p99 / max from the instant,
how many were sent within 1 s of it, and lost / duplicate runs.

The "due now" burst (bench/burst.py: the jobs are written a moment before their second) stays the
worst case; this is the case where the instant is known in advance.
"""
from __future__ import annotations

import sys
import time
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any, Sequence

from bench import steps
from bench.burst import DRAIN_TIMEOUT_SECONDS, SETUP_MARGIN_SECONDS, SETUP_SECONDS_PER_JOB
from bench.harness import SecondTicker, Servers, Workspace, create_jobs, wait_for
from bench.outcome import summarize, tickwork_send_lags, tickwork_statuses
from bench.rig import TickworkRig, tick_summary, warm_up
from bench.phases import Deadline
from bench.target import Arrival, Target
from tickwork.dispatch.poller import TICK_OFFSET_MS
from tickwork.secrets import vault
from tickwork.store.tenants import find_tenant

# How long before the instant the jobs exist and the poller is ticking: longer than any lookahead.
LEAD_SECONDS = 15
SENT_WITHIN_MS = 1000
FIXED_LOOKAHEAD_MS = 1500  # the lookahead of before: every instant claimed 1.5 to 2 s ahead
TICK_ON_SECONDS = 5
SETUP_SECONDS_PER_TENANT = 0.05  # its row, its jobs' INSERT and their first index_job
SETUP_SLACK = 2  # the setup's estimate, doubled: 100,000 jobs overran it on the 2-core machine under load


def hourly_at(instant: int) -> str:
    """A cron expression (with seconds) whose next fire time is `instant` (epoch seconds): hourly at its
    minute and second."""
    at = datetime.fromtimestamp(instant, tz=timezone.utc)
    return f"{at.second} {at.minute} * * * *"


Layout = Sequence[tuple[str, int]]  # tenants by name, with how many jobs each has at the instant


def run(
    servers: Servers, target: Target, layout: Layout, workers: int, db_pool: int, executor_processes: int,
    settings: dict[str, Any] | None = None, deadline: Deadline | None = None,
) -> dict[str, Any]:
    """One top-of-the-hour instant; `settings` overrides Tickwork settings (the A/B of a run). The jobs take
    the target's URLs in turn. Past `deadline` the drain stops and what arrived is reported (`over_budget`)."""
    deadline = deadline or Deadline(None)
    jobs = sum(n for _, n in layout)
    with Workspace(servers, "hour") as ws:
        ws.settings = replace(ws.settings, **(settings or {}))
        rig = TickworkRig(ws, workers, db_pool, executor_processes=executor_processes)
        try:
            warm_up(ws, rig, target)
            setup = SETUP_SLACK * (SETUP_MARGIN_SECONDS + jobs * SETUP_SECONDS_PER_JOB
                                   + len(layout) * SETUP_SECONDS_PER_TENANT)
            instant = int(time.time() + setup) + LEAD_SECONDS
            tenant_of = {job_id: tenant for tenant, n in layout
                         for job_id in create_jobs(ws, n, hourly_at(instant), instant * 1000, target.urls, "bench",
                                                   tenant)}
            sign_ahead(ws, [tenant for tenant, _ in layout])
            first_tick = int(time.time()) + 1
            if first_tick > instant - LEAD_SECONDS // 2:
                raise RuntimeError("setup overran the lead time; raise LEAD_SECONDS")
            deadline.check("the instant")
            ticker = SecondTicker(rig.tick, first_tick, instant + 1, TICK_OFFSET_MS / 1000).start()
            ticker.join()
            _tick_on(rig, ticker, jobs, deadline)
            drained = rig.drain(deadline.bounded(DRAIN_TIMEOUT_SECONDS))
            wait_for(lambda: target.count() >= jobs, deadline.bounded(5))
            result = {"settings": settings or {}, "tenants": len(layout), "over_budget": deadline.over(),
                      "last_handed_after_instant_s": _since(instant, rig.invoker.last_handed_at),
                      **_result(ws, target, ticker, tenant_of, instant, drained, jobs)}
        finally:
            rig.close()  # the executor processes report their step timers as they close
    return result | _steps(jobs)


def _steps(runs: int) -> dict[str, Any]:
    """With --profile-steps, the CPU of each step of the instant's path (bench/steps.py), also printed."""
    if not steps.enabled():
        return {}
    profile = steps.report(runs)
    print(steps.table(profile), file=sys.__stdout__, flush=True)
    return {"steps": profile}


def _tick_on(rig: TickworkRig, ticker: SecondTicker, jobs: int, deadline: Deadline) -> None:
    """Past the instant, tick on (a few seconds at a time) until every run is handed over or the budget is spent:
    an instant too large to claim ahead is handed over late, which is what is measured, not dropped."""
    while rig.invoker.handed < jobs and deadline.left() > TICK_ON_SECONDS:
        first = int(time.time()) + 1
        more = SecondTicker(rig.tick, first, first + TICK_ON_SECONDS - 1, TICK_OFFSET_MS / 1000).start()
        more.join()
        ticker.ticks += more.ticks
        ticker.errors += more.errors


def sign_ahead(ws: Workspace, tenants: Sequence[str]) -> None:
    """Each tenant's signing secret made, as a tenant that has sent before has it: else the first invocations
    of the instant make it, every tenant's at once (the warm-up made only the first tenant's)."""
    svc = ws.services(db_pool_size=1)
    now = datetime.now(timezone.utc)
    with svc.db.connection() as conn:
        for tenant in tenants:
            vault.signing_keys(svc.keyring, conn, find_tenant(conn, tenant), now)


def _since(start: float, end: float | None) -> float | None:
    return None if end is None else round(end - start, 3)


def _result(
    ws: Workspace, target: Target, ticker: SecondTicker, tenant_of: dict[str, str], instant: int, drained: bool,
    jobs: int,
) -> dict[str, Any]:
    arrivals = target.take()
    with ws.connect() as conn:
        send_lags = tickwork_send_lags(conn, "bench", (instant, instant))
        statuses = tickwork_statuses(conn, "bench", (instant, instant))
    deliveries = summarize(arrivals, set(tenant_of), (instant, instant), 1, send_lags)
    claiming = [t for t in ticker.ticks if t.result is not None and t.result.dispatched]
    return {
        "instant": instant, "jobs": jobs, "drained": drained, "statuses": statuses,
        "deliveries": deliveries.as_dict(),
        "worst_tenants": worst_tenants(arrival_lags_by_tenant(arrivals, tenant_of, instant)),
        # Within 1 s after the instant: a request sent before it is early, a defect, not a success.
        "sent_within_1s": sum(1 for lag in send_lags if 0 <= lag <= SENT_WITHIN_MS),
        "sent_early": sum(1 for lag in send_lags if lag < 0),
        "claimed_ahead_seconds": [round(instant - (t.second + TICK_OFFSET_MS / 1000), 1) for t in claiming],
        "claiming_ticks": [tick_summary(t.result) for t in claiming],
        "tick_errors": [repr(e) for e in ticker.errors][:3],
    }


def arrival_lags_by_tenant(arrivals: Sequence[Arrival], tenant_of: dict[str, str], instant: int,
                           ) -> dict[str, list[float]]:
    """Each tenant's arrival lags (ms after the instant), first arrival of each run only."""
    seen: set[str] = set()
    lags: dict[str, list[float]] = {}
    for arrival in sorted(arrivals, key=lambda a: a.at):
        if arrival.run_id in seen or arrival.job_id not in tenant_of:
            continue
        seen.add(arrival.run_id)
        lags.setdefault(tenant_of[arrival.job_id], []).append((arrival.at - instant) * 1000)
    return lags


def worst_tenants(lags: dict[str, list[float]], count: int = 3) -> list[dict[str, Any]]:
    """The tenants whose last run arrived latest: name, runs arrived, their max lag (ms)."""
    ranked = sorted(lags.items(), key=lambda item: max(item[1]), reverse=True)[:count]
    return [{"tenant": tenant, "arrived": len(ms), "max_ms": round(max(ms), 1)} for tenant, ms in ranked]


def rows(r: dict[str, Any], processes: int) -> list[tuple[str, ...]]:
    from bench.report import lags, ms, ratio, verdict

    new, old = r["adaptive"], r["fixed"]
    nd, od = new["deliveries"], old["deliveries"]
    jobs, quota = new["jobs"], new["settings"].get("max_runs_in_flight")
    in_flight = f"; the tenant's max_runs_in_flight {quota:,}" if quota else ""
    return [
        (f"Top of the hour: {jobs:,} jobs share one instant (created {LEAD_SECONDS} s ahead){in_flight}; executors "
         f"in {processes} processes; baseline column: the fixed 1.5 s lookahead of before, same run",),
        ("send lag p50 / p99 / max (instant → request sent)", lags(nd["send_lag_ms"]), lags(od["send_lag_ms"]),
         ratio(nd["send_lag_ms"]["p99"], od["send_lag_ms"]["p99"]) + " (p99)",
         verdict(nd["send_lag_ms"]["p99"], 500, ms) + " (p99)"),
        ("sent within 1 s of the instant", f"{new['sent_within_1s']:,} of {jobs:,}", f"{old['sent_within_1s']:,} of {jobs:,}",
         "", f"all: {'met' if new['sent_within_1s'] == jobs else 'MISSED'}"),
        ("sent before the instant (earliest)", _early(new), _early(old), "",
         f"none: {'met' if not new['sent_early'] else 'MISSED'}"),
        ("arrival lag p50 / p99 / max (instant → target)", lags(nd["arrival_lag_ms"]), lags(od["arrival_lag_ms"]),
         ratio(nd["arrival_lag_ms"]["p99"], od["arrival_lag_ms"]["p99"]) + " (p99)"),
        ("delivered / dropped / duplicate", _counts(nd), _counts(od), "",
         "0 dropped, 0 duplicate: " + ("met" if nd["dropped"] == nd["duplicates"] == 0 else "MISSED")),
        ("claimed: seconds before the instant, by tick", _ahead(new), _ahead(old)),
    ]


def _early(r: dict[str, Any]) -> str:
    from bench.report import ms

    return f"{r['sent_early']:,} ({ms(r['deliveries']['send_lag_ms']['min'])})"


def _counts(d: dict[str, Any]) -> str:
    return f"{d['delivered']:,} / {d['dropped']:,} / {d['duplicates']:,}"


def _ahead(r: dict[str, Any]) -> str:
    return ", ".join(f"{a:g} s ({t['claimed']:,})" for a, t in zip(r["claimed_ahead_seconds"], r["claiming_ticks"]))
