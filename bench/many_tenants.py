"""Top of the hour for many tenants (issue 33): every tenant's runs of one instant on time, at the default quotas.

Two phases of `python -m bench`, each the top-of-the-hour run of bench/top_of_hour.py (jobs written 15 s ahead,
the poller ticking at half past every second until the instant) with another layout of tenants:

- **tenants**: 20 tenants of 500 jobs and one of 1,000 (11,000 runs at one instant), every tenant at the
  default quotas (max_runs_in_flight 500, max_jobs 1,000), beside one tenant's 10,000 with its quotas raised
  (the benchmarks' max_runs_in_flight), in both executor modes: in processes (as Lambda) and on threads of the
  poller's process (as `make dev`).
- **instant**: 100,000 runs at one instant, 100 tenants of 1,000 at the default quotas, the due index in 3
  shards, executors in processes; report-only: the scheduler's share (its last hand-off before the instant, or
  how late) and the arrival lag.

The jobs take the target's loopback addresses in turn (bench/target.py): one address and port give a client
28,232 ephemeral ports (net.ipv4.ip_local_port_range), and 100,000 connections made ahead of one instant, with
those still in TIME_WAIT, would run out. The phase raises its open-files limit to the hard limit (the executors'
and the target's sockets) and reports the limits it ran under. Each phase has a time budget: past it the drain
stops and what arrived is reported, marked over budget.
"""
from __future__ import annotations

import argparse
import contextlib
import math
import resource
from pathlib import Path
from typing import Any, Callable

from bench import top_of_hour
from bench.harness import Servers
from bench.phases import Deadline, Phase
from bench.target import Target
from tickwork.settings import DEFAULT_MAX_JOBS, DEFAULT_MAX_RUNS_IN_FLIGHT

TENANTS, TENANT_JOBS, BIG_TENANT_JOBS = 20, 500, DEFAULT_MAX_JOBS
SINGLE_TENANT_JOBS = 10_000
INSTANT_TENANTS, INSTANT_SHARDS = 100, 3
TENANTS_BUDGET_SECONDS = 300
INSTANT_BUDGET_SECONDS = 300
# Connections one target address takes: the ephemeral ports of one (address, port) less room for those
# still in TIME_WAIT from the phases before.
CONNECTIONS_PER_ADDRESS = 20_000
PORT_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
GOAL_MAX_MS = 250
DEFAULT_QUOTAS = {"max_runs_in_flight": DEFAULT_MAX_RUNS_IN_FLIGHT}


def tenant_layout(tenants: int, jobs_each: int, big_jobs: int = 0) -> list[tuple[str, int]]:
    """`tenants` tenants of `jobs_each` jobs, then one of `big_jobs` (none when 0)."""
    layout = [(f"tenant-{n:03d}", jobs_each) for n in range(1, tenants + 1)]
    return layout + ([("tenant-big", big_jobs)] if big_jobs else [])


def addresses_for(runs: int, per_address: int = CONNECTIONS_PER_ADDRESS) -> int:
    """How many target addresses `runs` connections at one instant need."""
    return max(1, math.ceil(runs / per_address))


def scheduler_share(last_handed_after_instant_s: float | None) -> str:
    """The poller's last hand-off, said from the instant: how long before it, or how late."""
    if last_handed_after_instant_s is None:
        return "nothing handed over"
    if last_handed_after_instant_s <= 0:
        return f"{abs(last_handed_after_instant_s):.2f} s before the instant"
    return f"{last_handed_after_instant_s:.2f} s late"


def raise_open_files() -> dict[str, Any]:
    """The open-files soft limit raised to the hard limit (inherited by the executor and target processes
    started after); returns the limits in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
    ports = PORT_RANGE.read_text().split() if PORT_RANGE.exists() else []
    return {"open_files": soft, "open_files_hard": hard,
            "ephemeral_ports": "-".join(ports) if ports else "unknown"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tenants-count", type=int, default=TENANTS,
                        help="tenants of --tenants-jobs jobs each in the many-tenant phase (plus one of 1,000)")
    parser.add_argument("--tenants-jobs", type=int, default=TENANT_JOBS)
    parser.add_argument("--tenants-single-jobs", type=int, default=SINGLE_TENANT_JOBS,
                        help="the one tenant's jobs (raised quotas) beside them, the baseline column")
    parser.add_argument("--tenants-budget", type=float, default=TENANTS_BUDGET_SECONDS,
                        help="seconds the many-tenant phase may take (its four instants together)")
    parser.add_argument("--instant-tenants", type=int, default=INSTANT_TENANTS,
                        help=f"tenants of {DEFAULT_MAX_JOBS:,} jobs in the report-only instant (100: 100,000 runs)")
    parser.add_argument("--instant-budget", type=float, default=INSTANT_BUDGET_SECONDS)


def phases(args: argparse.Namespace, srv: Servers) -> list[Phase]:
    x = args.executor_processes
    layout = tenant_layout(args.tenants_count, args.tenants_jobs, BIG_TENANT_JOBS)
    many = sum(n for _, n in layout)
    modes = (x, 0) if x > 0 else (0,)
    instant = args.instant_tenants * DEFAULT_MAX_JOBS
    return [
        Phase("tenants", f"Top of the hour: {len(layout)} tenants, {many:,} runs at one instant, default quotas",
              f"many tenants ({many:,} runs at one instant, and one tenant's {args.tenants_single_jobs:,}; executors "
              f"{' and '.join(_mode(m) for m in modes)}; budget {args.tenants_budget:g} s)",
              lambda: _run_tenants(srv, args, layout, modes), _tenants_rows),
        Phase("instant", f"One instant of {instant:,} runs across {args.instant_tenants} tenants (report-only)",
              f"instant ({instant:,} runs, {args.instant_tenants} tenants, {INSTANT_SHARDS} shards, executors in "
              f"{max(x, 1)} processes; budget {args.instant_budget:g} s)",
              lambda: _run_instant(srv, args), _instant_rows),
    ]


def _run_tenants(srv: Servers, args: argparse.Namespace, layout: list[tuple[str, int]],
                 modes: tuple[int, ...]) -> dict[str, Any]:
    deadline, limits = Deadline(args.tenants_budget), raise_open_files()
    results: dict[str, Any] = {"limits": limits, "by_mode": {}}
    with Target(args.target_nice, addresses=addresses_for(sum(n for _, n in layout))) as target:
        for mode in modes:
            run = _runner(srv, target, args, mode, deadline)
            results["by_mode"][mode] = {"many": run(layout, DEFAULT_QUOTAS),
                                        "single": run([("bench", args.tenants_single_jobs)], None)}
    return results


def _runner(srv: Servers, target: Target, args: argparse.Namespace, mode: int,
            deadline: Deadline) -> Callable[[list[tuple[str, int]], dict[str, Any] | None], dict[str, Any]]:
    def run(layout: list[tuple[str, int]], settings: dict[str, Any] | None) -> dict[str, Any]:
        return top_of_hour.run(srv, target, layout, args.workers, args.db_pool, mode, settings, deadline)
    return run


def _run_instant(srv: Servers, args: argparse.Namespace) -> dict[str, Any]:
    deadline, limits = Deadline(args.instant_budget), raise_open_files()
    layout = tenant_layout(args.instant_tenants, DEFAULT_MAX_JOBS)
    addresses = addresses_for(sum(n for _, n in layout))
    settings = {**DEFAULT_QUOTAS, "due_index_shards": INSTANT_SHARDS}
    with Target(args.target_nice, addresses=addresses) as target:
        result = top_of_hour.run(srv, target, layout, args.workers, args.db_pool, max(args.executor_processes, 1),
                                 settings, deadline)
    return {**result, "limits": limits, "addresses": addresses, "processes": max(args.executor_processes, 1)}


def _mode(processes: int) -> str:
    return f"in {processes} processes" if processes else "in the poller's process"


def _tenants_rows(r: dict[str, Any]) -> list[tuple[str, ...]]:
    from bench.report import lags, ratio, verdict, ms

    first = next(iter(r["by_mode"].values()))["many"]
    out: list[tuple[str, ...]] = [
        (f"Top of the hour, many tenants: {first['tenants']} tenants, {first['jobs']:,} runs at one instant, every "
         f"tenant at the default quotas; baseline column: one tenant's {_jobs(r)} with raised quotas, "
         f"same run; {_limits(r['limits'])}",)]
    for mode, pair in r["by_mode"].items():
        many, single = pair["many"], pair["single"]
        md, sd = many["deliveries"], single["deliveries"]
        out += [
            (f"arrival lag p50 / p99 / max, executors {_mode(int(mode))}", lags(md["arrival_lag_ms"]),
             lags(sd["arrival_lag_ms"]), ratio(md["arrival_lag_ms"]["max"], sd["arrival_lag_ms"]["max"]) + " (max)",
             f"max {verdict(md['arrival_lag_ms']['max'], GOAL_MAX_MS, ms)}; baseline's "
             f"{verdict(sd['arrival_lag_ms']['max'], GOAL_MAX_MS, ms)}"),
            ("  scheduler's share: last hand-off", scheduler_share(many["last_handed_after_instant_s"]),
             scheduler_share(single["last_handed_after_instant_s"])),
            ("  latest tenants: max arrival lag", _worst(many), ""),
            ("  delivered / dropped / duplicate", _counts(many), _counts(single)),
        ]
    return out


def _instant_rows(r: dict[str, Any]) -> list[tuple[str, ...]]:
    from bench.report import lags

    d = r["deliveries"]
    return [
        (f"One instant, report-only: {r['jobs']:,} runs across {r['tenants']} tenants at the default quotas, due "
         f"index in {INSTANT_SHARDS} shards, executors in {r['processes']} processes, target on {r['addresses']} "
         f"loopback addresses; {_limits(r['limits'])}",),
        ("scheduler's share: last hand-off", scheduler_share(r["last_handed_after_instant_s"])),
        ("claimed: seconds before the instant, by tick",
         ", ".join(f"{a:g} s ({t['claimed']:,})" for a, t in zip(r["claimed_ahead_seconds"], r["claiming_ticks"]))),
        ("runs held back by their tenants' max_runs_in_flight, all ticks",
         f"{sum(t.get('delayed') or 0 for t in r['claiming_ticks']):,}"),
        ("arrival lag p50 / p99 / max (instant → target)", lags(d["arrival_lag_ms"])),
        ("latest tenants: max arrival lag", _worst(r)),
        ("delivered / dropped / duplicate", _counts(r)),
    ]


def _jobs(r: dict[str, Any]) -> str:
    return f"{next(iter(r['by_mode'].values()))['single']['jobs']:,}"


def _limits(limits: dict[str, Any]) -> str:
    return f"open files {limits['open_files']:,}, ephemeral ports {limits['ephemeral_ports']}"


def _worst(r: dict[str, Any]) -> str:
    return ", ".join(f"{w['tenant']} {w['max_ms']:,.0f} ms" for w in r["worst_tenants"])


def _counts(r: dict[str, Any]) -> str:
    d = r["deliveries"]
    over = "; over budget: drain stopped" if r.get("over_budget") else ""
    return f"{d['delivered']:,} / {d['dropped']:,} / {d['duplicates']:,}{over}"
