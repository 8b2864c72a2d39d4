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

import time
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from bench.burst import DRAIN_TIMEOUT_SECONDS, SETUP_MARGIN_SECONDS, SETUP_SECONDS_PER_JOB
from bench.harness import SecondTicker, Servers, Workspace, create_jobs, wait_for
from bench.outcome import summarize, tickwork_send_lags, tickwork_statuses
from bench.rig import TickworkRig, tick_summary, warm_up
from bench.target import Target
from tickwork.dispatch.poller import TICK_OFFSET_MS

# How long before the instant the jobs exist and the poller is ticking: longer than any lookahead.
LEAD_SECONDS = 15
SENT_WITHIN_MS = 1000
FIXED_LOOKAHEAD_MS = 1500  # the lookahead of before: every instant claimed 1.5 to 2 s ahead


def hourly_at(instant: int) -> str:
    """A cron expression (with seconds) whose next fire time is `instant` (epoch seconds): hourly at its
    minute and second."""
    at = datetime.fromtimestamp(instant, tz=timezone.utc)
    return f"{at.second} {at.minute} * * * *"


def run(
    servers: Servers, target: Target, jobs: int, workers: int, db_pool: int, executor_processes: int,
    settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One top-of-the-hour instant; `settings` overrides Tickwork settings (the A/B of a run)."""
    with Workspace(servers, "hour") as ws:
        ws.settings = replace(ws.settings, **(settings or {}))
        rig = TickworkRig(ws, workers, db_pool, executor_processes=executor_processes)
        try:
            warm_up(ws, rig, target)
            instant = int(time.time() + SETUP_MARGIN_SECONDS + jobs * SETUP_SECONDS_PER_JOB) + LEAD_SECONDS
            job_ids = create_jobs(ws, jobs, hourly_at(instant), instant * 1000, target.url, "bench")
            first_tick = int(time.time()) + 1
            if first_tick > instant - LEAD_SECONDS // 2:
                raise RuntimeError("setup overran the lead time; raise LEAD_SECONDS")
            ticker = SecondTicker(rig.tick, first_tick, instant + 1, TICK_OFFSET_MS / 1000).start()
            ticker.join()
            drained = rig.drain(DRAIN_TIMEOUT_SECONDS)
            wait_for(lambda: target.count() >= jobs, 5)
            return {"settings": settings or {}, **_result(ws, target, ticker, job_ids, instant, drained, jobs)}
        finally:
            rig.close()


def _result(
    ws: Workspace, target: Target, ticker: SecondTicker, job_ids: list[str], instant: int, drained: bool, jobs: int,
) -> dict[str, Any]:
    arrivals = target.take()
    with ws.connect() as conn:
        send_lags = tickwork_send_lags(conn, "bench", (instant, instant))
        statuses = tickwork_statuses(conn, "bench", (instant, instant))
    deliveries = summarize(arrivals, set(job_ids), (instant, instant), 1, send_lags)
    claiming = [t for t in ticker.ticks if t.result is not None and t.result.dispatched]
    return {
        "instant": instant, "jobs": jobs, "drained": drained, "statuses": statuses,
        "deliveries": deliveries.as_dict(),
        # Within 1 s after the instant: a request sent before it is early, a defect, not a success.
        "sent_within_1s": sum(1 for lag in send_lags if 0 <= lag <= SENT_WITHIN_MS),
        "sent_early": sum(1 for lag in send_lags if lag < 0),
        "claimed_ahead_seconds": [round(instant - (t.second + TICK_OFFSET_MS / 1000), 1) for t in claiming],
        "claiming_ticks": [tick_summary(t.result) for t in claiming],
        "tick_errors": [repr(e) for e in ticker.errors][:3],
    }


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
