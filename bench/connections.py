"""Connection strategies side by side (issue 20): connecting ahead of a run's instant against connecting
at it, to a target that keeps connections open and to one that closes each after its answer, with the
executors in worker processes (as in Lambda) and in the poller's process (as `make dev` runs them).

- **connect ahead** (`Settings.connect_ahead`, today's default): the executor takes a keep-alive
  connection or opens one before the instant, so only the request's write is left for the instant;
- **connect at the instant** (`connect_ahead=False`, `TICKWORK_CONNECT_AHEAD=false`): nothing is opened
  ahead; the run connects at its instant, paying the handshake in its lag.
The connections each target accepted during the window are reported beside the lags: they show what
each strategy did.

One window per executor mode and strategy: JOBS every-second jobs against each of three targets (the
keep-alive bench target; one answering `Connection: close` and closing; one closing connections idle
for IDLE_TIMEOUT_SECONDS, fresh ones included, bench/target.py), SECONDS seconds, as bench/steady.py runs
them. The targets share the window, so the difference between them is not the machine's drift from one
run to the next; the two strategies run back to back in each mode. 200 jobs a target (600 runs a
second) stay under the in-process ceiling of about 1,000 a second (bottleneck 12), so the lag measures
the connection, not a backlog; 15 s give 3,000 runs per target and window, the p99 being the 30th
slowest (in 5 s windows it moved by 50–100 ms from one run to the next). Four windows of 15 s plus about
4 s of set-up each add about 80 s to `make bench`.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from bench.burst import check_ahead, due_second
from bench.harness import EVERY_SECOND, SecondTicker, Servers, Workspace, create_jobs, tick_stats, wait_for
from bench.outcome import summarize, tickwork_send_lags, tickwork_statuses
from bench.report import counts, lags, mode, ms, ratio, verdict
from bench.rig import TickworkRig, warm_up
from bench.target import Target
from tickwork.dispatch.poller import TICK_OFFSET_MS

JOBS = 200
SECONDS = 15
QUICK_SECONDS = 5
DRAIN_TIMEOUT_SECONDS = 60
# Once the executors are drained every request was answered, so it has arrived: no long wait.
ARRIVAL_GRACE_SECONDS = 2
STRATEGIES = (("ahead", True), ("at_instant", False))
# The third target closes a connection that brings nothing for this long (a header or keep-alive timeout
# shorter than the 1.5 s a run's connection is opened ahead): what Tickwork's fallback for such a target
# (tickwork.http.connections: open them later, within half that) costs beside a target that waits.
IDLE_TIMEOUT_SECONDS = 1.0
# Job name prefixes, which tell the targets' runs apart in Postgres.
TARGETS = (("keepalive", "keep-alive target"), ("closing", "closing target"),
           ("idle", f"target closing idle connections after {IDLE_TIMEOUT_SECONDS:g} s"))


def run(
    servers: Servers, keep_alive: Target, jobs: int, seconds: int, workers: int, db_pool: int,
    executor_processes: int, nice: int,
) -> dict[str, Any]:
    """Every mode (executor_processes N > 0, then 0: the poller's process) and strategy, one window each.
    The second mode runs the strategies in the other order, so neither always has the later moment."""
    modes = [executor_processes, 0] if executor_processes > 0 else [0]
    with Target(nice, close_after_answer=True) as closing, Target(nice, idle_timeout=IDLE_TIMEOUT_SECONDS) as idle:
        targets = {"keepalive": keep_alive, "closing": closing, "idle": idle}
        windows = []
        for i, processes in enumerate(modes):
            strategies = STRATEGIES if i % 2 == 0 else STRATEGIES[::-1]
            windows.append({"executor_processes": processes, **{
                name: window(servers, targets, jobs, seconds, workers, db_pool, processes, ahead)
                for name, ahead in strategies}})
    return {"jobs": jobs, "seconds": seconds, "modes": windows}


def window(
    servers: Servers, targets: dict[str, Target], jobs: int, seconds: int, workers: int, db_pool: int,
    executor_processes: int, connect_ahead: bool,
) -> dict[str, Any]:
    """`jobs` every-second jobs per target for `seconds` seconds, with the strategy in the rig's Settings
    (which the executor processes are built from too)."""
    with Workspace(servers, "connections") as ws:
        ws.settings = replace(ws.settings, connect_ahead=connect_ahead)
        rig = TickworkRig(ws, workers, db_pool, executor_processes=executor_processes)
        try:
            warm_up(ws, rig, targets["keepalive"])
            first = due_second(jobs * len(targets))
            job_ids = {name: create_jobs(ws, jobs, EVERY_SECOND, first * 1000, target.url, name)
                       for name, target in targets.items()}
            check_ahead(first - 2)
            opened = {name: target.connections() for name, target in targets.items()}
            ticker = SecondTicker(rig.tick, first - 2, first + seconds - 3, TICK_OFFSET_MS / 1000).start()
            ticker.join()
            drained = rig.drain(DRAIN_TIMEOUT_SECONDS)
            wait_for(lambda: all(t.count() >= jobs * seconds for t in targets.values()), ARRIVAL_GRACE_SECONDS)
            span = (first, first + seconds - 1)
            return {
                "connect_ahead": connect_ahead, "drained": drained, "runs_by_process": rig.runs_by_process(),
                "ticks": tick_stats([t.seconds for t in ticker.ticks], seconds),
                "tick_errors": [repr(e) for e in ticker.errors][:3],
                "targets": {name: _outcome(ws, target, name, set(job_ids[name]), span, seconds, opened[name])
                            for name, target in targets.items()},
            }
        finally:
            rig.close()


def _outcome(
    ws: Workspace, target: Target, name: str, job_ids: set[str], span: tuple[int, int], seconds: int, opened: int,
) -> dict[str, Any]:
    arrivals = target.take()
    with ws.connect() as conn:
        send_lags = tickwork_send_lags(conn, name, span)
        statuses = tickwork_statuses(conn, name, span)
    return {"deliveries": summarize(arrivals, job_ids, span, seconds, send_lags).as_dict(), "statuses": statuses,
            "connections": target.connections() - opened}


def rows(r: dict[str, Any]) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for m in r["modes"]:
        out.append((f"Connections: {r['jobs']:,} jobs every second to each of three targets (keep-alive; closing: "
                    f"answers `Connection: close` and closes; closing connections idle {IDLE_TIMEOUT_SECONDS:g} s) "
                    f"for {r['seconds']} s; {mode(m['executor_processes'])}; "
                    f"Tickwork column: connect ahead (today's default), baseline column: connect at the instant "
                    f"(TICKWORK_CONNECT_AHEAD=false), same run",))
        for name, label in TARGETS:
            out += _target_rows(m["ahead"], m["at_instant"], name, label)
    return out


def _target_rows(ahead: dict[str, Any], instant: dict[str, Any], name: str, label: str) -> list[tuple[str, ...]]:
    a, b = ahead["targets"][name], instant["targets"][name]
    ad, bd = a["deliveries"], b["deliveries"]
    clean = all(d["dropped"] == d["duplicates"] == 0 for d in (ad, bd))
    return [
        (f"{label}: send lag p50 / p99 / max", lags(ad["send_lag_ms"]), lags(bd["send_lag_ms"]),
         ratio(ad["send_lag_ms"]["p99"], bd["send_lag_ms"]["p99"]) + " (p99)",
         verdict(ad["send_lag_ms"]["p99"], 100, ms) + " (p99)"),
        (f"{label}: arrival lag p50 / p99 / max", lags(ad["arrival_lag_ms"]), lags(bd["arrival_lag_ms"]),
         ratio(ad["arrival_lag_ms"]["p99"], bd["arrival_lag_ms"]["p99"]) + " (p99)"),
        (f"{label}: delivered / dropped / duplicate", _counts(a), _counts(b), "",
         "0 dropped, 0 duplicate, both: " + ("met" if clean else "MISSED")),
        (f"{label}: connections accepted; ticks run / due", _opened(ahead, a), _opened(instant, b)),
    ]


def _counts(t: dict[str, Any]) -> str:
    """As the other phases count, plus the runs recorded failed (a target that answered may be among them)."""
    failed = t["statuses"].get("failed", 0)
    return counts(t["deliveries"], t["statuses"]) + (f" ({failed:,} recorded failed)" if failed else "")


def _opened(w: dict[str, Any], t: dict[str, Any]) -> str:
    return f"{t['connections']:,}; {w['ticks']['count']} / {w['ticks']['expected']}"
