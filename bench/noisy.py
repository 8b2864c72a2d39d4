"""Noisy neighbour (issue 22): does a tenant inside its quotas slow, starve or stop another tenant's runs?

Two tenants, made as the operator makes them (the admin event `create-tenant`), each with its own API key
and the default quotas; every job is created through the API (bench/tenants.py), so what the API refuses
is refused here too and reported. Tenant B runs B_JOBS every-second jobs against the good bench target.
One run, two windows:

1. **B alone** (BASELINE_SECONDS): the baseline;
2. **B while A misbehaves** (NOISY_SECONDS): A's jobs start together, one kind of misbehaviour each (KINDS;
   `--noisy-a kind=count,...` shows them one at a time too), every one an every-second job, 30 s timeout,
   3 attempts, 85 of them by default (the default quota allows 100: 6,000 runs a minute):
   - blackhole: a port whose accept queue is full, so every connect hangs (bench/badtargets.py);
   - stall: a target that accepts and never reads, sent the largest body the API takes;
   - expansion: secrets of the largest size referenced as often as the API lets the body and
     EXPANSION_HEADERS headers hold them, to a sink that reads it all;
   - catchup: `catchup: all` jobs created through the API with its clock set back BACKLOG_SECONDS
     (Services.clock, as the tests pin it): every slot since is due at once when they reach the poller,
     as after an outage that long; sent to the sink;
   - notify: a job failing at once (a refused port, 1 attempt) with `notify` on failure to the blackhole.

Per window for B: runs expected and delivered, success rate, send and arrival lag, runs missed, lost, still
queued or running, or without a row, a few seconds (GRACE_SECONDS) after the window. The goal: B's
send-lag p99 within 1.5x of its baseline, its success rate unchanged, no B run missed or lost. Both
executor modes run, as in bench/connections.py: executor processes (as Lambda), then the poller's process
(as `make dev`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

from bench.badtargets import BadTargets, refused_url
from bench.harness import EVERY_SECOND, SecondTicker, Servers, Workspace, sleep_until, tick_stats, wait_for
from bench.outcome import summarize, tickwork_send_lags, tickwork_statuses
from bench.report import lags, mode, ms, ratio
from bench.rig import TickworkRig, warm_up
from bench.target import Target
from bench.tenants import InProcessApi, Reply
from tickwork.api.models import MAX_BODY_CHARS, MAX_HEADERS
from tickwork.dispatch.poller import TICK_OFFSET_MS
from tickwork.secrets.vault import MAX_VALUE_BYTES
from tickwork.settings import DEFAULT_MAX_RUNS_IN_FLIGHT
from tickwork.timeutil import from_ms, rfc3339
from tickwork_local.executors import MAX_WORKERS

B_JOBS = 100
# Executor environments: the local runtime's (tickwork_local.executors.MAX_WORKERS), Lambda's default account
# concurrency. One tenant's runs in flight (max_runs_in_flight, 500 by default) can hold at most that many.
WORKERS = MAX_WORKERS
BASELINE_SECONDS = 15
NOISY_SECONDS = 30
KINDS = ("blackhole", "stall", "expansion", "catchup", "notify")
# 85 every-second jobs: inside the default quota of 6,000 runs a minute (100 such jobs).
DEFAULT_MIX = {"blackhole": 20, "stall": 20, "expansion": 2, "catchup": 23, "notify": 20}
# Inside the default catch-up window (300 s): every slot is run, none recorded missed.
BACKLOG_SECONDS = 180
# 4 of the API's 50 headers full of references: about 67 MB a run with the body; more is --noisy-expansion-headers.
EXPANSION_HEADERS = 4
A_TIMEOUT_SECONDS = 30
A_RETRY = {"strategy": "fixed", "max_attempts": 3, "delay_seconds": 1}
GRACE_SECONDS = 5
DRAIN_TIMEOUT_SECONDS = 60
# Seconds of set-up per job created through the API (its rate limit: 20 a second after a burst of 40).
SETUP_SECONDS_PER_JOB = 1 / 12
SETUP_MARGIN_SECONDS = 4
GOAL_LAG_RATIO = 1.5
SECRET = "S"
REFERENCE = "${secrets." + SECRET + "}"


@dataclass(frozen=True)
class Plan:
    b_jobs: int = B_JOBS
    baseline_seconds: int = BASELINE_SECONDS
    noisy_seconds: int = NOISY_SECONDS
    mix: tuple[tuple[str, int], ...] = tuple(DEFAULT_MIX.items())
    backlog_seconds: int = BACKLOG_SECONDS
    expansion_headers: int = EXPANSION_HEADERS


def parse_mix(text: str) -> tuple[tuple[str, int], ...]:
    """`blackhole=20,stall=0,...` (argparse type): kinds not named get no jobs; a kind twice is refused."""
    mix: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        kind, _, count = part.partition("=")
        if kind not in KINDS or kind in mix or not count.isdigit():
            raise ValueError(f"{part!r}: expected kind=count, kind one of {', '.join(KINDS)}, each once")
        mix[kind] = int(count)
    return tuple(mix.items())


# ---------------------------------------------------------------- what the tenants ask the API for


def b_job(i: int, url: str, start_ms: int) -> dict[str, Any]:
    return {"name": f"b-{i}", "schedule": EVERY_SECOND, "start_at": rfc3339(from_ms(start_ms)),
            "request": {"method": "POST", "url": url, "headers": {"content-type": "application/json"},
                        "body": '{"bench":true}', "timeout_seconds": 5}}


def a_job(kind: str, i: int, urls: dict[str, str], start_ms: int, expansion_headers: int) -> dict[str, Any]:
    """One job of misbehaviour `kind` (urls: blackhole, stall, sink, refused); catchup jobs have no start_at
    (their slots begin when the API believes it is)."""
    request: dict[str, Any] = {"method": "POST", "url": urls["sink"], "timeout_seconds": A_TIMEOUT_SECONDS}
    job: dict[str, Any] = {"name": f"a-{kind}-{i}", "schedule": EVERY_SECOND, "request": request,
                           "retry": dict(A_RETRY)}
    if kind != "catchup":
        job["start_at"] = rfc3339(from_ms(start_ms))
    if kind == "blackhole":
        request["url"] = urls["blackhole"]
    elif kind == "stall":
        request.update(url=urls["stall"], body="x" * MAX_BODY_CHARS)
    elif kind == "expansion":
        request.update(body=REFERENCE * (MAX_BODY_CHARS // len(REFERENCE)),
                       headers={f"x-expand-{h}": REFERENCE * (MAX_VALUE_BYTES // len(REFERENCE))
                                for h in range(min(expansion_headers, MAX_HEADERS))})
    elif kind == "catchup":
        job["catchup"] = "all"
    elif kind == "notify":
        request["url"] = urls["refused"]
        job.update(retry={**A_RETRY, "max_attempts": 1}, notify={"url": urls["blackhole"], "on": ["failure"]})
    return job


def expanded_bytes(job: dict[str, Any]) -> int:
    """What one run of `job` is once its references are replaced by MAX_VALUE_BYTES each."""
    texts = [job["request"].get("body") or "", *job["request"].get("headers", {}).values()]
    grow = MAX_VALUE_BYTES - len(REFERENCE)
    return sum(len(t) + t.count(REFERENCE) * grow for t in texts)


# ---------------------------------------------------------------- what came of it (pure)


def b_window(deliveries: dict[str, Any], statuses: dict[str, int], expected: int) -> dict[str, Any]:
    """B's figures for one window; `unrecorded`: expected slots with no execution row at all."""
    return {"expected": expected, "delivered": deliveries["delivered"], "duplicates": deliveries["duplicates"],
            "success_rate": statuses.get("succeeded", 0) / expected if expected else None,
            "send_lag_ms": deliveries["send_lag_ms"], "arrival_lag_ms": deliveries["arrival_lag_ms"],
            "missed": statuses.get("missed", 0), "lost": statuses.get("lost", 0),
            "queued": statuses.get("queued", 0), "running": statuses.get("running", 0) + statuses.get("retrying", 0),
            "unrecorded": max(0, expected - sum(statuses.values())),
            "statuses": statuses}


def goal(alone: dict[str, Any], noisy: dict[str, Any]) -> dict[str, Any]:
    """Issue 22's three conditions for B with A against B alone."""
    base, worse = alone["send_lag_ms"]["p99"], noisy["send_lag_ms"]["p99"]
    lag_ratio = worse / base if base and worse is not None else None
    return {"lag_ratio": lag_ratio, "lag": lag_ratio is not None and lag_ratio <= GOAL_LAG_RATIO,
            "success": noisy["success_rate"] is not None and alone["success_rate"] is not None
            and noisy["success_rate"] >= alone["success_rate"],
            "none_missed_or_lost": noisy["missed"] == noisy["lost"] == 0}


# ---------------------------------------------------------------- the run


def run(servers: Servers, target: Target, plan: Plan, workers: int, db_pool: int, executor_processes: int,
        ) -> dict[str, Any]:
    """Executor processes first (when asked for), then the poller's process: one pair of windows each."""
    modes = [executor_processes, 0] if executor_processes > 0 else [0]
    return {"plan": {**plan.__dict__, "mix": dict(plan.mix)},
            "modes": [one_mode(servers, target, plan, workers, db_pool, x) for x in modes]}


def one_mode(servers: Servers, target: Target, plan: Plan, workers: int, db_pool: int, processes: int,
             ) -> dict[str, Any]:
    with Workspace(servers, "noisy") as ws, BadTargets() as bad:
        # The default quotas, runs in flight too (the other benchmarks' workspaces raise that one).
        ws.settings = replace(ws.settings, max_runs_in_flight=DEFAULT_MAX_RUNS_IN_FLIGHT)
        rig = TickworkRig(ws, workers, db_pool, executor_processes=processes)
        api = InProcessApi(ws.services(db_pool_size=2))
        try:
            warm_up(ws, rig, target)
            result = {"executor_processes": processes, **_windows(ws, rig, api, bad, target, plan)}
        finally:
            bad.close()  # first: the runs hanging on its sockets end, so the executors can finish
            drained = rig.drain(DRAIN_TIMEOUT_SECONDS)  # before the workspace closes the pools they write through
            api.close()
            rig.close()
    return {**result, "drained_after": drained}


def _windows(ws: Workspace, rig: TickworkRig, api: InProcessApi, bad: BadTargets, target: Target, plan: Plan,
             ) -> dict[str, Any]:
    urls = {**bad.urls, "refused": refused_url()}
    mix = dict(plan.mix)
    t0 = int(time.time() + SETUP_MARGIN_SECONDS + (plan.b_jobs + sum(mix.values())) * SETUP_SECONDS_PER_JOB) + 2
    t1 = t0 + plan.baseline_seconds + 1  # one second apart: the catch-up jobs are created in it
    end = t1 + plan.noisy_seconds - 1
    b_key, a_key = api.create_tenant("tenant-b"), api.create_tenant("tenant-a")
    for i in range(1, plan.b_jobs + 1):
        api.require(b_key, "POST", "/jobs", b_job(i, target.url, t0 * 1000))
    secret = api.call(a_key, "PUT", f"/secrets/{SECRET}", {"value": "x" * MAX_VALUE_BYTES}) if mix.get(
        "expansion") else None
    a_jobs = {kind: [a_job(kind, i, urls, t1 * 1000, plan.expansion_headers) for i in range(1, n + 1)]
              for kind, n in mix.items()}
    created = {kind: _create(api, a_key, jobs) for kind, jobs in a_jobs.items() if kind != "catchup"}
    if secret is not None and secret.status >= 300:
        created["expansion"]["refused"][f"the secret: {_refusal(secret)}"] = 1
    if time.time() > t0 - 2.05:
        raise RuntimeError(f"set-up overran: second {t0 - 2} already started; raise SETUP_SECONDS_PER_JOB")
    ticker = SecondTicker(rig.tick, t0 - 2, end - 2, TICK_OFFSET_MS / 1000).start()
    sleep_until(t1 - 1.9)  # the baseline's last slot has been sent
    with api.set_back(plan.backlog_seconds):
        created["catchup"] = _create(api, a_key, a_jobs.get("catchup", []))
    sleep_until(t1 + GRACE_SECONDS)
    alone = _b_figures(ws, (t0, t1 - 2), plan.b_jobs)
    ticker.join()
    sleep_until(end + 1 + GRACE_SECONDS)
    noisy = _b_figures(ws, (t1, end), plan.b_jobs)
    arrivals = target.take()
    alone.update(_delivered(arrivals, alone))
    noisy.update(_delivered(arrivals, noisy))
    return {"alone": _b_window(alone), "noisy": _b_window(noisy),
            "a": _a_figures(ws, bad, a_jobs, created, end), "ticks": tick_stats([t.seconds for t in ticker.ticks],
                                                                                end - t0 + 1),
            "tick_errors": [repr(e) for e in ticker.errors][:3]}


def _create(api: InProcessApi, key: str, jobs: list[dict[str, Any]]) -> dict[str, Any]:
    """Created, and each refusal with the API's answer (status, code, field, message), counted."""
    refused: dict[str, int] = {}
    for job in jobs:
        reply = api.call(key, "POST", "/jobs", job)
        if reply.status != 201:
            refused[_refusal(reply)] = refused.get(_refusal(reply), 0) + 1
    return {"created": len(jobs) - sum(refused.values()), "refused": refused}


def _refusal(reply: Reply) -> str:
    error = (reply.body or {}).get("error", {})
    return f"{reply.status} {error.get('code')} {error.get('field')}: {error.get('message')}"


def _b_figures(ws: Workspace, span: tuple[int, int], jobs: int) -> dict[str, Any]:
    """What Postgres says of B's slots in `span` now: statuses and send lags."""
    with ws.connect() as conn:
        ids = {row[0] for row in conn.execute("SELECT id::text FROM jobs WHERE name LIKE 'b-%'")}
        return {"span": span, "job_ids": ids, "expected": jobs * (span[1] - span[0] + 1),
                "statuses": tickwork_statuses(conn, "b", span), "send_lags": tickwork_send_lags(conn, "b", span)}


def _delivered(arrivals: list[Any], figures: dict[str, Any]) -> dict[str, Any]:
    span = figures["span"]
    per_job = span[1] - span[0] + 1
    return {"deliveries": summarize(arrivals, figures["job_ids"], span, per_job, figures["send_lags"]).as_dict()}


def _b_window(figures: dict[str, Any]) -> dict[str, Any]:
    return {"span": figures["span"], **b_window(figures["deliveries"], figures["statuses"], figures["expected"])}


# What ended A's attempts: the commonest errors (the first words that tell them apart) and how long they took.
_ATTEMPT_ERRORS = """
SELECT coalesce(left(a.error, 60), 'HTTP ' || a.status_code), count(*),
       percentile_disc(0.5) WITHIN GROUP (ORDER BY a.duration_ms)
  FROM attempts a JOIN executions e ON e.id = a.execution_id JOIN jobs j ON j.id = e.job_id
 WHERE j.name LIKE %(prefix)s GROUP BY 1 ORDER BY 2 DESC LIMIT 3
"""
_NOTIFICATIONS = """
SELECT n.status, count(*) FROM notifications n JOIN jobs j ON j.id = n.job_id
 WHERE j.name LIKE 'a-notify-%' GROUP BY n.status
"""


def _a_figures(ws: Workspace, bad: BadTargets, a_jobs: dict[str, list[dict[str, Any]]],
               created: dict[str, Any], end: int) -> dict[str, Any]:
    """Per kind: jobs created and refused, and every slot of theirs up to the window's end by status."""
    with ws.connect() as conn:
        kinds = {kind: {**created[kind], "statuses": tickwork_statuses(conn, f"a-{kind}", (0, end)),
                        "attempts": [list(row) for row in conn.execute(_ATTEMPT_ERRORS, {"prefix": f"a-{kind}-%"})]}
                 for kind in a_jobs}
        notifications = {row[0]: int(row[1]) for row in conn.execute(_NOTIFICATIONS)}
    if "expansion" in kinds and a_jobs["expansion"]:
        kinds["expansion"]["expanded_bytes_per_run"] = expanded_bytes(a_jobs["expansion"][0])
    if "notify" in kinds:
        kinds["notify"]["notifications"] = notifications
    return {"kinds": kinds, "targets": bad.counts()}


# ---------------------------------------------------------------- rows


def rows(r: dict[str, Any]) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    p = r["plan"]
    for m in r["modes"]:
        out.append((f"Noisy neighbour: tenant B, {p['b_jobs']} jobs every second to the good target, alone for "
                    f"{p['baseline_seconds']} s (baseline column), then {p['noisy_seconds']} s while tenant A "
                    f"misbehaves inside its quotas (Tickwork column); {mode(m['executor_processes'])}",))
        out += _b_rows(m["alone"], m["noisy"]) + _a_rows(m["a"]) + [
            ("ticks run / due", f"{m['ticks']['count']} / {m['ticks']['expected']}")]
    return out


def _b_rows(alone: dict[str, Any], noisy: dict[str, Any]) -> list[tuple[str, ...]]:
    g = goal(alone, noisy)
    met = {True: "met", False: "MISSED"}
    lag_ratio = f" ({g['lag_ratio']:.2f}x)" if g["lag_ratio"] is not None else ""
    return [
        ("B send lag p50 / p99 / max", lags(noisy["send_lag_ms"]), lags(alone["send_lag_ms"]),
         ratio(noisy["send_lag_ms"]["p99"], alone["send_lag_ms"]["p99"]) + " (p99)",
         f"p99 ≤ {GOAL_LAG_RATIO}x alone: {met[g['lag']]}{lag_ratio}"),
        ("B arrival lag p50 / p99 / max", lags(noisy["arrival_lag_ms"]), lags(alone["arrival_lag_ms"]),
         ratio(noisy["arrival_lag_ms"]["p99"], alone["arrival_lag_ms"]["p99"]) + " (p99)"),
        ("B runs expected / delivered; succeeded", _runs(noisy), _runs(alone), "",
         f"success rate unchanged: {met[g['success']]}"),
        (f"B runs missed / lost / still queued / running / no row, {GRACE_SECONDS} s after", _left(noisy),
         _left(alone), "",
         f"0 missed, 0 lost: {met[g['none_missed_or_lost']]}"),
    ]


def _runs(w: dict[str, Any]) -> str:
    rate = "n/a" if w["success_rate"] is None else f"{w['success_rate']:.1%}"
    return f"{w['expected']:,} / {w['delivered']:,}; {rate}"


def _left(w: dict[str, Any]) -> str:
    return " / ".join(f"{w[k]:,}" for k in ("missed", "lost", "queued", "running", "unrecorded"))


def _a_rows(a: dict[str, Any]) -> list[tuple[str, ...]]:
    out = []
    for kind, k in a["kinds"].items():
        made = f"{k['created']} jobs" + (f", refused: {_refusals(k['refused'])}" if k["refused"] else "")
        extra = ""
        if "expanded_bytes_per_run" in k:
            extra = f"; {k['expanded_bytes_per_run'] / 1e6:.0f} MB a run expanded"
        if "notifications" in k:
            extra = "; notifications " + _statuses(k["notifications"])
        if k.get("attempts"):
            error, n, median_ms = k["attempts"][0]
            extra += f"; commonest attempt end: {n:,} x {error} (median {ms(median_ms)})"
        out.append((f"A {kind}: {made}", _statuses(k["statuses"]) + extra))
    t = a["targets"]
    out.append(("A's targets: stall connections; sink requests / bytes",
                f"{t['stall_connections']:,}; {t['sink_requests']:,} / {t['sink_bytes'] / 1e6:,.0f} MB"))
    return out


def _statuses(counts: dict[str, int]) -> str:
    return ", ".join(f"{status} {n:,}" for status, n in sorted(counts.items())) or "none"


def _refusals(refused: dict[str, int]) -> str:
    return "; ".join(f"{n} x {why}" for why, n in refused.items())
