"""What the pause check costs the executor (issue 33, item 5): at each instant of a group, just before its
writes, the executor reads the pause markers of the group's jobs in one Redis round trip
(tickwork.runs.stops). Measured in one run against DATABASE_URL / REDIS_URL and the bench target:

1. the check itself, `DueIndex.stopped_jobs` for the jobs of a group of 1, 50 and 250 runs (250: the largest
   group an invocation gets), none marked: µs per call, p50 / p99 of CALLS calls;
2. a group's runs at their instant through the executor (started ahead in Postgres, made ready, sent by the
   Sender to the target), with the check and without it (the same executor, its `stopped_lately` answering
   "none" without asking Redis: the path before the check), rounds interleaved: each run's send lag (its
   instant → its request written), p50 / p99 / max over every round.

    .venv/bin/python -m bench.bench_pause_check
"""
from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Sequence

from bench.harness import ONCE_A_DAY, LineSink, Servers, Workspace, insert_jobs, percentile
from bench.target import Target
from tickwork.dueindex.index import DueIndex
from tickwork.models import Dispatch, StartedExecution
from tickwork.runs.executor import Executor, http_client
from tickwork.timeutil import from_ms
from tickwork.wiring import Services

GROUPS = (1, 50, 250)
CALLS = 2_000
ROUNDS = 20
# Each round's instant is this far after its dispatch: the group is started and made ready well before it.
LEAD_SECONDS = 0.6


@dataclass
class TimedExecutor(Executor):
    """The executor, noting when each request is written; `check` False: the path without the pause check."""

    check: bool = True
    written: list[float] = field(default_factory=list)

    def stopped_lately(self, runs: Sequence[StartedExecution]) -> set[str]:
        return super().stopped_lately(runs) if self.check else set()

    def fire(self, prepared: Any) -> datetime:
        sent_at = super().fire(prepared)
        self.written.append(time.time())
        return sent_at


def check_calls(index: DueIndex, job_ids: list[str]) -> dict[str, float | None]:
    """µs per stopped_jobs call for these jobs, none of them marked."""
    took = []
    for _ in range(CALLS):
        began = time.perf_counter()
        index.stopped_jobs(job_ids)
        took.append((time.perf_counter() - began) * 1e6)
    return {"p50": percentile(took, 50), "p99": percentile(took, 99)}


def one_round(svc: Services, ws: Workspace, job_ids: list[str], check: bool) -> list[float]:
    """One group of runs of these jobs, due LEAD_SECONDS from now: each run's send lag, in ms."""
    instant_ms = int((time.time() + LEAD_SECONDS) * 1000)
    with ws.connect() as conn:
        rows = conn.execute(
            "INSERT INTO executions (id, tenant_id, job_id, scheduled_for, trigger, status)"
            " SELECT gen_random_uuid(), tenant_id, id, %s, 'schedule', 'queued' FROM jobs WHERE id = ANY(%s::uuid[])"
            " RETURNING id::text", (from_ms(instant_ms), job_ids)).fetchall()
    executor = TimedExecutor(svc, http_client(svc.settings), check=check)
    outcomes = executor.run([Dispatch(row[0], 1, instant_ms) for row in rows])
    if outcomes != ["succeeded"] * len(rows):
        raise RuntimeError(f"runs did not all succeed: {sorted(set(outcomes))}")
    return [written * 1000 - instant_ms for written in executor.written]


def lags(values: list[float]) -> str:
    return " / ".join(f"{percentile(values, q) or 0.0:.2f}" for q in (50, 99, 100)) + " ms"


def main() -> None:
    servers = Servers(os.environ.get("DATABASE_URL") or Servers().database_url,
                      os.environ.get("REDIS_URL") or Servers().redis_url)
    with Workspace(servers, "pausecheck") as ws, Target() as target:
        svc = ws.services(db_pool_size=4)
        print(f"The pause check: {CALLS:,} calls per group size, µs p50 / p99; then {ROUNDS} interleaved rounds of "
              f"each group at its instant with and without it: each run's send lag p50 / p99 / max, and the "
              f"instant's last write, median / max over the rounds")
        for size in GROUPS:
            job_ids = insert_jobs(ws, size, ONCE_A_DAY, int(time.time() * 1000) + 86_400_000, target.url, f"g{size}")
            calls = check_calls(svc.index, job_ids)
            sent: dict[bool, list[list[float]]] = {True: [], False: []}
            with contextlib.redirect_stdout(LineSink()):  # the executor's metrics, printed as EMF lines
                one_round(svc, ws, job_ids, True)  # warm: connections, statements
                for i in range(2 * ROUNDS):
                    check = i % 2 == 0
                    sent[check].append(one_round(svc, ws, job_ids, check))
            print(f"group of {size:>3}: check {calls['p50'] or 0:.0f} / {calls['p99'] or 0:.0f} µs")
            for check, label in ((True, "with   "), (False, "without")):
                last = [max(lags_ms) for lags_ms in sent[check]]
                print(f"    {label} send lag {lags([lag for lags_ms in sent[check] for lag in lags_ms])}; "
                      f"last write {percentile(last, 50) or 0:.2f} / {max(last):.2f} ms")


if __name__ == "__main__":
    main()
