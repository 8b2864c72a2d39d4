"""`python -m bench` (`make bench`): every benchmark of issue 4, Tickwork and the 0cron baseline in one run.

Prints the machine and a table with both side by side; a full run (no --quick, no --only) also rewrites
the results section of docs/benchmarks.md. Everything runs against DATABASE_URL / REDIS_URL (default:
the local servers), in a fresh schema and key namespace per benchmark, dropped afterwards. A phase that
cannot run is reported as skipped, with its reason, and the others' results are still printed and kept
(bench/phases.py); the exit status is 1 when a phase failed with an error, 0 when it only lacked a tool.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from bench import (
    baseline_0cron, burst, coldstart, connections, idle, many_tenants, noisy, rebuild, replay, shards, steady, steps,
    top_of_hour,
)
from bench.harness import LineSink, Servers, capture_logs
from bench.phases import Phase, run_phases
from bench.report import (
    ROOT,
    counts,
    lags,
    lost_verdict,
    machine,
    mode,
    ms,
    plain,
    ratio,
    seconds,
    table,
    verdict,
    write_doc,
)
from bench.target import DEFAULT_NICE, Target
from tickwork.settings import DEFAULT_MAX_RUNS_IN_FLIGHT

# In the order they run.
PHASES = ("burst", "hour", "tenants", "instant", "steady", "connections", "noisy", "replay", "idle", "rebuild", "coldstart",
          "shards", "schedule")
DOC = ROOT / "docs" / "benchmarks.md"
MIB = 1024 * 1024


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true",
                        help=f"steady for 10 s instead of 60 s, connections {connections.QUICK_SECONDS} s instead of "
                             f"{connections.SECONDS} s; doc left alone")
    parser.add_argument("--only", action="append", choices=PHASES, help="run only this benchmark (repeatable)")
    parser.add_argument("--burst-jobs", type=int, default=10_000)
    parser.add_argument("--hour-jobs", type=int, default=10_000, help="jobs sharing the top-of-the-hour instant")
    parser.add_argument("--hour-default-quotas", action="store_true",
                        help="the hour's tenant at the default max_runs_in_flight instead of one past its jobs "
                             "(with --hour-jobs 1000: a tenant alone at its max_jobs, inside every default quota)")
    many_tenants.add_arguments(parser)
    parser.add_argument("--steady-jobs", type=int, default=1_000)
    parser.add_argument("--steady-seconds", type=int, default=None, help="default 60, or 10 with --quick")
    parser.add_argument("--connections-jobs", type=int, default=connections.JOBS,
                        help="jobs due every second against each of the two targets of the connections benchmark")
    parser.add_argument("--connections-seconds", type=int, default=None,
                        help=f"seconds of each connections window (default {connections.SECONDS}, "
                             f"or {connections.QUICK_SECONDS} with --quick)")
    parser.add_argument("--noisy-workers", type=int, default=noisy.WORKERS,
                        help="executor environments in the noisy-neighbour benchmark: Lambda's default account "
                             "concurrency, as the local runtime has (not --workers: one tenant's runs in flight "
                             "may hold up to max_runs_in_flight of them)")
    parser.add_argument("--noisy-b-jobs", type=int, default=noisy.B_JOBS,
                        help="tenant B's every-second jobs in the noisy-neighbour benchmark")
    parser.add_argument("--noisy-baseline-seconds", type=int, default=noisy.BASELINE_SECONDS,
                        help="seconds of B alone (the baseline window)")
    parser.add_argument("--noisy-seconds", type=int, default=noisy.NOISY_SECONDS,
                        help="seconds of B while A misbehaves")
    parser.add_argument("--noisy-a", type=_mix, default=tuple(noisy.DEFAULT_MIX.items()),
                        metavar="KIND=N,...",
                        help=f"tenant A's every-second jobs per misbehaviour ({', '.join(noisy.KINDS)}); a kind "
                             f"left out gets none (default "
                             f"{','.join(f'{k}={n}' for k, n in noisy.DEFAULT_MIX.items())})")
    parser.add_argument("--noisy-backlog-seconds", type=int, default=noisy.BACKLOG_SECONDS,
                        help="how far in the past the catch-up jobs' slots begin")
    parser.add_argument("--replay-rate", type=int, default=replay.RATE,
                        help="tenant A's replay pace in the replay benchmark (TICKWORK_REPLAY_PER_SECOND)")
    parser.add_argument("--replay-runs", type=int, default=replay.RUNS,
                        help="failed runs tenant A replays in the replay benchmark")
    parser.add_argument("--replay-baseline-seconds", type=int, default=replay.BASELINE_SECONDS,
                        help="each window of tenant B alone (before every round and after the last), in the replay "
                             "benchmark")
    parser.add_argument("--replay-rounds", type=int, default=replay.ROUNDS,
                        help="requests the replay is made in, each beside B between two alone windows (1: one "
                             "request of every run, B alone before and after)")
    parser.add_argument("--noisy-expansion-headers", type=int, default=noisy.EXPANSION_HEADERS,
                        help="headers of each expansion job full of secret references (the API takes 50)")
    parser.add_argument("--idle-jobs", type=int, default=100_000)
    parser.add_argument("--rebuild-jobs", type=int, default=100_000,
                        help="jobs in the index rebuild benchmark (1000000: about 10 minutes with the baseline)")
    parser.add_argument("--rebuild-due-jobs", type=int, default=1_000,
                        help="jobs due every second while the index is rebuilt, dispatched by the ticks")
    parser.add_argument("--no-rebuild-baseline", action="store_true",
                        help="skip timing the old rebuild (commit 149bc66) next to today's")
    parser.add_argument("--shards-jobs", type=int, default=60_000,
                        help="jobs claimed per round of the sharded-claiming benchmark (on its own Redis Cluster)")
    parser.add_argument("--shards-rounds", type=int, default=3, help="interleaved rounds of 1, 2 and 3 shards")
    parser.add_argument("--workers", type=int, default=64,
                        help="executor pool width, Tickwork and baseline alike (the local runtime's 64)")
    parser.add_argument("--db-pool", type=int, default=16,
                        help="Postgres connections of the executors (shared out among executor processes)")
    parser.add_argument("--executor-processes", type=int, default=2, metavar="N",
                        help="run the executors (and the baseline's tasks) in N worker processes of their own, "
                             "as Lambda gives each its own environment; 0: threads of the poller's process, "
                             "as `make dev` runs them (default 2, this machine's cores). A full run also "
                             "measures steady with 0, Tickwork only")
    parser.add_argument("--target-nice", type=int, default=DEFAULT_NICE,
                        help="the HTTP target's niceness: scheduled ahead of the rest by default, as a target on "
                             "hosts of its own; 0 shares the cores equally (bench/target.py)")
    parser.add_argument("--coldstart-samples", type=int, default=9,
                        help="fresh interpreters per handler and side in the cold-start benchmark")
    parser.add_argument("--profile-steps", action="store_true",
                        help="the top-of-the-hour phases print each step's CPU per run, in every process "
                             "(bench/steps.py)")
    parser.add_argument("--json", type=Path, help="also write every raw figure to this file")
    parser.add_argument("--no-doc", action="store_true", help="never rewrite docs/benchmarks.md")
    return parser.parse_args(argv)


def _mix(text: str) -> tuple[tuple[str, int], ...]:
    try:
        return noisy.parse_mix(text)
    except ValueError as exc:  # argparse shows an ArgumentTypeError's own words
        raise argparse.ArgumentTypeError(str(exc)) from None


def servers() -> Servers:
    defaults = Servers()
    return Servers(os.environ.get("DATABASE_URL") or defaults.database_url,
                   os.environ.get("REDIS_URL") or defaults.redis_url)


def run_burst(srv: Servers, target: Target, args: argparse.Namespace) -> dict[str, Any]:
    n, w, p, x = args.burst_jobs, args.workers, args.db_pool, args.executor_processes
    return {
        "tickwork_poller_alone": burst.run(srv, target, n, w, p, executors=False),
        "baseline_poll_alone": baseline_0cron.run_burst(srv, target, n, w, p, execute=False),
        "tickwork": burst.run(srv, target, n, w, p, executors=True, executor_processes=x),
        "baseline": baseline_0cron.run_burst(srv, target, n, w, p, processes=x),
    }


def run_hour(srv: Servers, target: Target, args: argparse.Namespace) -> dict[str, Any]:
    """The top of the hour twice in one run: the fixed lookahead of before (the baseline column), then
    the adaptive one (today's defaults)."""
    n, w, p, x = args.hour_jobs, args.workers, args.db_pool, args.executor_processes
    quotas = {"max_runs_in_flight": DEFAULT_MAX_RUNS_IN_FLIGHT} if args.hour_default_quotas else {}
    fixed = {"max_lookahead_ms": top_of_hour.FIXED_LOOKAHEAD_MS, **quotas}
    return {"fixed": top_of_hour.run(srv, target, [("bench", n)], w, p, x, fixed),
            "adaptive": top_of_hour.run(srv, target, [("bench", n)], w, p, x, quotas or None)}


def run_steady(srv: Servers, target: Target, args: argparse.Namespace, in_process_too: bool) -> dict[str, Any]:
    """Steady with the chosen executor processes; `in_process_too`: Tickwork once more with its executors
    in the poller's process (as `make dev` runs), for the second row group."""
    n, s, w, p, x = args.steady_jobs, args.steady_seconds, args.workers, args.db_pool, args.executor_processes
    results = {
        "tickwork_poller_alone": burst.run(srv, target, n, w, p, executors=False),
        "tickwork": steady.run(srv, target, n, s, w, p, executor_processes=x),
        "baseline": baseline_0cron.run_steady(srv, target, n, s, w, p, processes=x),
    }
    if in_process_too:
        results["tickwork_in_process"] = steady.run(srv, target, n, s, w, p, executor_processes=0)
    return results


def noisy_plan(args: argparse.Namespace) -> noisy.Plan:
    return noisy.Plan(args.noisy_b_jobs, args.noisy_baseline_seconds, args.noisy_seconds, args.noisy_a,
                      args.noisy_backlog_seconds, args.noisy_expansion_headers)


def run_schedule() -> str:
    """bench/bench_schedule.py (next-fire maths, µs per call) and bench/bench_plan.py (the poller's plan per due
    job: H, spread, calendars), as their own tables."""
    from bench import bench_plan, bench_schedule

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        bench_schedule.main()
        print()
        bench_plan.main()
    return out.getvalue()


def burst_rows(r: dict[str, Any], n: int, processes: int) -> list[tuple[str, ...]]:
    alone, base_alone, tw, base = r["tickwork_poller_alone"], r["baseline_poll_alone"], r["tickwork"], r["baseline"]
    tw_d, base_d = tw["deliveries"], base["deliveries"]
    tick = alone["tick"]
    return [
        (f"Burst: {n:,} jobs due in one second; {mode(processes)} (the baseline's tasks likewise)",),
        ("dispatched: tick start → last hand-off, poller alone", seconds(alone["dispatch_seconds"]),
         seconds(base_alone["dispatch_seconds"]), ratio(alone["dispatch_seconds"], base_alone["dispatch_seconds"]),
         verdict(alone["dispatch_seconds"], 1.0, seconds)),
        ("dispatched: same, executors running", seconds(tw["dispatch_seconds"]),
         seconds(base["dispatch_seconds"]), ratio(tw["dispatch_seconds"], base["dispatch_seconds"]),
         verdict(tw["dispatch_seconds"], 1.0, seconds)),
        ("all arrived: last request at target − due second", seconds(tw["all_arrived_after_due_seconds"]),
         seconds(base["all_arrived_after_due_seconds"]),
         ratio(tw["all_arrived_after_due_seconds"], base["all_arrived_after_due_seconds"])),
        ("send lag p50 / p99 / max", lags(tw_d["send_lag_ms"]), lags(base_d["send_lag_ms"]),
         ratio(tw_d["send_lag_ms"]["p99"], base_d["send_lag_ms"]["p99"]) + " (p99)"),
        ("delivered / dropped / duplicate", counts(tw_d, tw["statuses"]), counts(base_d), "", lost_verdict(tw_d)),
        ("poller round trips for the burst: Redis / Postgres",
         f"{tick['redis_round_trips']} / {tick['postgres_round_trips']} ({tick['batches']} batches, 1 tick)",
         f"{base_alone['tick']['redis_round_trips']:,} / 0 (+3 Postgres, 2 Redis per run in its tasks)",
         ratio(tick["redis_round_trips"], base_alone["tick"]["redis_round_trips"]) + " (Redis)"),
    ]


def steady_rows(r: dict[str, Any], n: int, s: int, processes: int) -> list[tuple[str, ...]]:
    tw, base, alone = r["tickwork"], r["baseline"], r["tickwork_poller_alone"]
    tw_d, base_d = tw["deliveries"], base["deliveries"]
    return [
        (f"Steady: {n:,} jobs every second for {s} s; {mode(processes)} (the baseline's tasks likewise)",),
        ("send lag p50 / p99 / max (scheduled → request sent)", lags(tw_d["send_lag_ms"]), lags(base_d["send_lag_ms"]),
         ratio(tw_d["send_lag_ms"]["p99"], base_d["send_lag_ms"]["p99"]) + " (p99)",
         verdict(tw_d["send_lag_ms"]["p99"], 100, ms) + " (p99)"),
        ("arrival lag p50 / p99 / max (scheduled → target)", lags(tw_d["arrival_lag_ms"]),
         lags(base_d["arrival_lag_ms"]), ratio(tw_d["arrival_lag_ms"]["p99"], base_d["arrival_lag_ms"]["p99"]) + " (p99)"),
        ("delivered / dropped / duplicate", counts(tw_d, tw["statuses"]), counts(base_d), "", lost_verdict(tw_d)),
        ("ticks run / due; tick p50 / max", _ticks(tw["ticks"]), _ticks(base["ticks"])),
        (f"poller alone, one second of {n:,} runs: tick", seconds(alone["dispatch_seconds"]), "", "",
         verdict(alone["dispatch_seconds"], 1.0, seconds)),
    ]


def steady_in_process_rows(tw: dict[str, Any], n: int, s: int) -> list[tuple[str, ...]]:
    """Tickwork alone, its executors on threads of the poller's process."""
    d = tw["deliveries"]
    return [
        (f"Steady, executors in the poller's process (as make dev runs): {n:,} jobs every second for {s} s",),
        ("send lag p50 / p99 / max (scheduled → request sent)", lags(d["send_lag_ms"]), "", "",
         verdict(d["send_lag_ms"]["p99"], 100, ms) + " (p99)"),
        ("arrival lag p50 / p99 / max (scheduled → target)", lags(d["arrival_lag_ms"])),
        ("delivered / dropped / duplicate", counts(d, tw["statuses"]), "", "", lost_verdict(d)),
        ("ticks run / due; tick p50 / max", _ticks(tw["ticks"])),
    ]


def steady_all_rows(r: dict[str, Any], args: argparse.Namespace) -> list[tuple[str, ...]]:
    out = steady_rows(r, args.steady_jobs, args.steady_seconds, args.executor_processes)
    if "tickwork_in_process" in r:
        out += steady_in_process_rows(r["tickwork_in_process"], args.steady_jobs, args.steady_seconds)
    return out


def idle_rows(r: dict[str, Any]) -> list[tuple[str, ...]]:
    empty, full, base, child = r["tickwork_empty"], r["tickwork_full"], r["baseline_full"], r["poller_process"]
    rows = [
        (f"Idle: nothing due, {r['jobs']:,} jobs scheduled",),
        ("idle tick p50 (p99), 0 jobs indexed", f"{ms(empty['p50_ms'])} ({ms(empty['p99_ms'])})"),
        (f"idle tick p50 (p99), {r['jobs']:,} jobs indexed", f"{ms(full['p50_ms'])} ({ms(full['p99_ms'])})",
         f"{ms(base['p50_ms'])} ({ms(base['p99_ms'])})", ratio(full["p50_ms"], base["p50_ms"])),
        ("round trips per idle tick", f"{full['tick']['redis_round_trips']} Redis (lock, fetch, release)",
         "1 Redis (ZRANGEBYSCORE)", ratio(full["tick"]["redis_round_trips"], 1)),
        ("poller process RSS after idle ticks", f"{child['after_ticks']['VmRSS'] / 1024:.0f} MiB "
         f"(peak {child['after_ticks']['VmHWM'] / 1024:.0f} MiB)"),
        (f"Redis memory for {r['jobs']:,} jobs", f"{r['tickwork_redis_bytes'] / MIB:.1f} MiB (due set + specs)",
         f"{r['baseline_redis_bytes'] / MIB:.1f} MiB (sorted set)",
         ratio(r["tickwork_redis_bytes"], r["baseline_redis_bytes"])),
    ]
    return rows


def rebuild_rows(r: dict[str, Any]) -> list[tuple[str, ...]]:
    """Today's rebuild against the old code path (bench/baseline_rebuild.py) in the baseline column."""
    t, base = r["ticking"], r.get("baseline_seconds")
    budget = f"{r['budget_seconds']:g} s"
    return [
        (f"Rebuild after Redis lost the index: {r['jobs']:,} jobs (+{r['due_jobs']:,} due every second); "
         f"baseline column: the old rebuild (commit 149bc66), same data, same run",),
        ("whole rebuild in one call, no budget", seconds(r["seconds"]), seconds(base), ratio(r["seconds"], base),
         verdict(r["seconds"], 2.0, seconds)),
        (f"ticking once a second (rebuild budget {budget} per tick): ticks, then index whole after",
         f"{t['ticks']} ticks, {seconds(t['healed_seconds'])}", f"1 tick of {seconds(base)}"),
        ("rebuild step per tick, max; whole tick p50 / max", f"{seconds(t['step_max_seconds'])}; "
         f"{seconds(t['tick_p50_seconds'])} / {seconds(t['tick_max_seconds'])}", seconds(base), "",
         f"step ≤ {budget} + a page"),
        ("runs dispatched by the ticks before the index was whole", f"{t['dispatched_before_whole']:,}",
         "0 (nothing is claimed until it is done)"),
    ]


def _ticks(t: dict[str, Any]) -> str:
    return f"{t['count']} / {t['expected']}; {ms(t['p50_ms'])} / {ms(t['max_ms'])}"


def command_line(argv: list[str]) -> str:
    return " ".join([".venv/bin/python -m bench", *argv])


def section(
    env: dict[str, str], argv: list[str], rows: list[tuple[str, ...]], notes: list[str], took: float, extra: str,
) -> str:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [f"Command: `{command_line(argv)}` (`make bench`), {took:.0f} s, {when}.", ""]
    lines += [f"- {key}: {value}" for key, value in env.items()]
    lines += ["", table(rows), ""]
    if extra:
        lines += ["Schedule maths (`bench/bench_schedule.py`, part of the same run):", "", "```", extra.rstrip(), "```", ""]
    if notes:
        lines += ["Warnings logged during the run (counted, not printed):", ""] + [f"- `{n}`" for n in notes]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    args = parse_args(argv)  # before stdout is redirected: --help and usage errors are printed
    if args.profile_steps:
        steps.enable()  # before any executor process starts: they inherit it
    sink = LineSink()  # executor processes add the lines their own sinks counted (bench/executors.py)
    with contextlib.redirect_stdout(sink):
        code = _main(args, argv, sys.__stdout__)
    print(f"({sink.lines:,} lines written to stdout by Tickwork during the run, metrics in the embedded metric format)")
    return code


class SharedTarget:
    """The keep-alive target the workloads share, started when a phase first asks for it (a phase that
    cannot start it is skipped like any other) and stopped with `stack`."""

    def __init__(self, nice: int, stack: contextlib.ExitStack, env: dict[str, str], out: Any) -> None:
        self.nice, self.stack, self.env, self.out = nice, stack, env, out
        self.target: Target | None = None

    def __call__(self) -> Target:
        if self.target is None:
            self.target = self.stack.enter_context(Target(self.nice))
            self.env["target"] = f"own process, nice {self.target.nice}"
            print(f"target: {self.env['target']}", flush=True, file=self.out)
        return self.target


def plan(args: argparse.Namespace, srv: Servers, target: SharedTarget) -> list[Phase]:
    """Every phase, in the order of PHASES."""
    x = args.executor_processes
    in_process_too = not args.only and x > 0
    return [
        Phase("burst", f"Burst: {args.burst_jobs:,} jobs due in one second", "burst",
              lambda: run_burst(srv, target(), args), lambda r: burst_rows(r, args.burst_jobs, x)),
        Phase("hour", f"Top of the hour: {args.hour_jobs:,} jobs share one instant",
              "top of the hour (twice: fixed, adaptive lookahead)",
              lambda: run_hour(srv, target(), args), lambda r: top_of_hour.rows(r, x)),
        *many_tenants.phases(args, srv),
        Phase("steady", f"Steady: {args.steady_jobs:,} jobs every second for {args.steady_seconds} s",
              f"steady ({args.steady_seconds} s, {'three times' if in_process_too else 'twice'})",
              lambda: run_steady(srv, target(), args, in_process_too), lambda r: steady_all_rows(r, args)),
        Phase("connections", "Connections: connect ahead vs connect at the instant",
              f"connections ({args.connections_seconds} s, {4 if x > 0 else 2} windows: connect ahead / at the "
              f"instant, {mode(x)}{' and in the poller' if x > 0 else ''})",
              lambda: connections.run(srv, target(), args.connections_jobs, args.connections_seconds, args.workers,
                                      args.db_pool, x, args.target_nice),
              connections.rows),
        Phase("noisy", "Noisy neighbour: tenant B's runs while tenant A misbehaves inside its quotas",
              f"noisy neighbour ({args.noisy_baseline_seconds} s alone, {args.noisy_seconds} s with A, "
              f"{mode(x)}{' and in the poller' if x > 0 else ''})",
              lambda: noisy.run(srv, target(), noisy_plan(args), args.noisy_workers, args.db_pool, x), noisy.rows),
        Phase("replay", f"Replay: tenant A replays {args.replay_runs:,} failed runs beside tenant B's steady load",
              f"replay ({args.replay_runs:,} runs at {args.replay_rate} a second, {mode(x)})",
              lambda: replay.run(srv, target(), args.noisy_workers, args.db_pool, x, args.replay_rate,
                                 args.replay_runs, args.noisy_b_jobs, args.replay_baseline_seconds,
                                 args.replay_rounds), replay.rows),
        Phase("idle", f"Idle: nothing due, {args.idle_jobs:,} jobs scheduled", "idle",
              lambda: idle.run(srv, args.idle_jobs), idle_rows),
        Phase("rebuild", f"Rebuild after Redis lost the index: {args.rebuild_jobs:,} jobs",
              f"rebuild ({args.rebuild_jobs:,} jobs)",
              lambda: rebuild.run(srv, args.rebuild_jobs, args.rebuild_due_jobs, not args.no_rebuild_baseline),
              rebuild_rows),
        Phase("coldstart", "Cold start: import of each handler module on Python 3.13",
              f"cold start ({args.coldstart_samples} samples per handler and side)",
              lambda: coldstart.run(args.coldstart_samples), coldstart.rows),
        Phase("shards", "Sharded claiming on a Redis Cluster of 3 primaries",
              f"shards ({args.shards_jobs:,} jobs, {args.shards_rounds} rounds, Redis Cluster of 3)",
              lambda: shards.run(args.shards_jobs, args.shards_rounds), shards.rows),
        Phase("schedule", "Schedule maths (bench/bench_schedule.py, bench/bench_plan.py)", "schedule maths",
              run_schedule),
    ]


def _main(args: argparse.Namespace, argv: list[str], out: Any) -> int:
    args.steady_seconds = args.steady_seconds or (10 if args.quick else 60)
    args.connections_seconds = args.connections_seconds or (
        connections.QUICK_SECONDS if args.quick else connections.SECONDS)
    chosen = args.only or list(PHASES)
    tally = capture_logs()
    srv = servers()
    env = machine(srv)
    print("\n".join(f"{k}: {v}" for k, v in env.items()), flush=True, file=out)
    started = time.time()
    with contextlib.ExitStack() as stack:
        phases = [p for p in plan(args, srv, SharedTarget(args.target_nice, stack, env, out)) if p.name in chosen]
        outcome = run_phases(phases, out, sys.stderr)
    took = time.time() - started
    results: dict[str, Any] = {"machine": env, "args": {k: str(v) for k, v in vars(args).items()},
                               **outcome.results, "skipped": outcome.skipped}
    schedule_table = outcome.results.get("schedule", "")
    print(file=out)
    print(plain(outcome.rows), file=out)
    if schedule_table:
        print("\n" + schedule_table.rstrip(), file=out)
    print(f"\n{took:.0f} s in all", file=out)
    if outcome.skipped:
        print(f"skipped: {', '.join(outcome.skipped)}" + (f" (failed: {', '.join(outcome.failed)})"
                                                           if outcome.failed else ""), file=out)
    notes = tally.summary()
    if notes:
        print("\nwarnings logged during the run:\n" + "\n".join(f"  {n}" for n in notes), file=out)
    for example in tally.examples:  # the first few with a traceback, whole: what the counts cannot say
        print("\n" + example, file=out)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    if not (args.quick or args.only or args.no_doc):
        write_doc(DOC, section(env, argv, outcome.rows, notes, took, schedule_table))
        print(f"\nresults written to {os.path.relpath(DOC, ROOT)}", file=out)
    return 1 if outcome.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
