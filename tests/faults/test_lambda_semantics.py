"""Lambda's rules for asynchronous invocation, played on purpose: the local runtime under a ChaoticInvoker.

Issue 21, section 4. Executor events are delivered as Lambda may deliver them (tickwork_local.chaos, seeded):
twice, late and out of order, throttled and tried again until too old (then dropped), retried after a function
error, and killed mid-run (tickwork_local.kills): before a request is written, after it was answered and before
its result is recorded, or after the work. The poller, the maintenance pass and the executors are the real ones,
in one process with the API (LocalRuntime), sending to Python's stock http.server, which counts every request
by run id. The sweeper's delays are shortened and maintenance runs every second, so what the faults leave
behind is settled within the test; Lambda's own timings (1 and 2 minutes before it retries a function error,
900 s of maximum event age) are shortened alike. Marked slow: each case waits on the wall clock.
"""
from __future__ import annotations

import json
import time
import urllib.request
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest

from tests.conftest import Target
from tests.support import wait_for
from tickwork.settings import Settings
from tickwork.timeutil import parse_rfc3339
from tickwork_local.chaos import Chaos, ChaosReport, ChaoticInvoker
from tickwork_local.kills import AFTER_WRITE
from tickwork_local.runtime import LocalRuntime

pytestmark = pytest.mark.slow

FINAL = {"succeeded", "failed", "skipped", "missed", "lost"}
OVERLAPS = ("allow", "skip", "queue_one")
# An attempt is over 1 s after its start, and ended lost 3 s later if no result came: 3 s for a live executor
# to record one (milliseconds on an idle machine), short enough for three lost attempts in a test.
REQUEST_TIMEOUT_SECONDS = 1
FAST_SWEEPER = {"sweep_after_seconds": 2, "lost_margin_seconds": 3, "rate_limit_per_second": 0}
MAINTENANCE_PERIOD_SECONDS = 1.0
# Lambda's timings, shortened as the sweeper's: a throttled event is dropped after 0.5 + 1 + 2 s of backoff
# (its 4th refusal would outlive the 5 s age); a failed invocation is tried again 1 s, then 2 s, later.
LAMBDA_TIMINGS = {"max_delay_seconds": 2.0, "throttle_backoff_seconds": 0.5, "retry_delay_seconds": 1.0,
                  "max_event_age_seconds": 5.0}
SOME_OF_EVERYTHING = {"duplicate": 0.15, "delay": 0.15, "throttle": 0.1, "kill": 0.08}
RUN_SECONDS = 8.0
# Long enough for a run whose three attempts are all killed: each ends lost 4-5 s after it starts, 1 s before the next.
SETTLE_SECONDS = 30.0

CASES = [
    pytest.param(Chaos(1, **SOME_OF_EVERYTHING, **LAMBDA_TIMINGS), 6, id="seed-1-6-jobs"),
    pytest.param(Chaos(2, **SOME_OF_EVERYTHING, **LAMBDA_TIMINGS), 24, id="seed-2-24-jobs-grouped"),
    pytest.param(Chaos(3, **SOME_OF_EVERYTHING, **LAMBDA_TIMINGS), 12, id="seed-3-12-jobs"),
    # Every invocation dies once it has a result to record: each attempt is sent, then ended lost by the sweeper.
    pytest.param(Chaos(4, duplicate=0, delay=0, throttle=0, kill=1.0, kill_points=(AFTER_WRITE,), **LAMBDA_TIMINGS),
                 3, id="seed-4-every-invocation-killed-after-its-write"),
]


@dataclass(frozen=True)
class Delivered:
    """One request the target received."""

    run_id: str
    attempt: int
    job_id: str
    slot: datetime


@pytest.mark.parametrize(("chaos", "jobs"), CASES)
def test_under_lambdas_delivery_rules_no_attempt_is_sent_twice_and_no_slot_is_lost(
    settings: Settings, chaos: Chaos, jobs: int,
) -> None:
    """Break: every-second jobs (each overlap policy; retries past the next slot or not) run for 8 s while their
    executor events are duplicated, delayed, throttled, dropped, retried and killed as `chaos` draws; then they
    are paused and the sweeper settles what the faults left.
    Must hold: no attempt of a run reaches the target twice; a run reaches it again only as a later attempt,
    after its earlier one was written by a killed invocation and ended lost (the crash window), or failed and
    was recorded; an attempt stopped before its write never arrives; every lost attempt belongs to a killed
    invocation; every request has its run's row, one run id per slot; every second of every job between its
    first and last slot has a row, and every row is final (a run, or recorded skipped, missed or lost)."""
    target = Target(stock=True)
    runtime = LocalRuntime(replace(settings, **FAST_SWEEPER), port=0, chaos=chaos,
                           maintenance_period=MAINTENANCE_PERIOD_SECONDS)
    runtime.start()
    invoker = runtime.invoker
    assert isinstance(invoker, ChaoticInvoker)
    try:
        job_ids = [_create_job(runtime, target, n) for n in range(jobs)]
        time.sleep(RUN_SECONDS)
        for job_id in job_ids:
            _api(runtime, "POST", f"/jobs/{job_id}/pause")
        settled = wait_for(lambda: invoker.pending() == 0 and not _unfinished(settings), SETTLE_SECONDS, 0.2)
    finally:
        runtime.stop()
        target.close()

    tally = _check(settings, job_ids, _delivered(target), invoker.report)
    print(f"\n{chaos}, {jobs} jobs\n  chaos: {invoker.report.summary()}\n  outcome: {tally}")
    assert settled, f"still unfinished after {SETTLE_SECONDS:.0f} s: {_unfinished(settings)}"
    if chaos.kill == 1.0:
        assert tally["sent again after a kill"] > 0


def _check(settings: Settings, job_ids: list[str], delivered: list[Delivered], report: ChaosReport) -> dict[str, Any]:
    """Assert the guarantees over what the target received and what Postgres recorded; returns the counts."""
    runs, errors = _rows(settings)
    sent = Counter((d.run_id, d.attempt) for d in delivered)
    assert [pair for pair, n in sent.items() if n > 1] == [], "an attempt of a run was sent twice"
    assert not report.unsent & set(sent), "an attempt stopped before its write reached the target"
    lost = {pair for pair, error in errors.items() if error and error.startswith("lost:")}
    assert lost <= report.in_killed, f"attempts ended lost that no kill explains: {lost - report.in_killed}"

    after_kill, after_failure, unexplained = 0, 0, []
    attempts_by_run: dict[str, list[int]] = defaultdict(list)
    for d in delivered:
        attempts_by_run[d.run_id].append(d.attempt)
    for run_id, numbers in attempts_by_run.items():
        for earlier in sorted(numbers)[:-1]:
            error = errors.get((run_id, earlier)) or ""
            if (run_id, earlier) in report.unrecorded and error.startswith("lost:"):
                after_kill += 1
            elif error and not error.startswith("lost:"):
                after_failure += 1  # its own executor recorded it failed (a timeout): the policy's retry
            else:
                unexplained.append((run_id, earlier, error))
    assert unexplained == [], "a run reached the target again with no killed or failed attempt before"

    assert {d.run_id for d in delivered} <= set(runs), "a request without its run's row"
    assert all(runs[d.run_id][:2] == (d.job_id, d.slot) for d in delivered), "a request of another slot than its row"
    run_ids_by_slot: dict[tuple[str, datetime], set[str]] = defaultdict(set)
    for d in delivered:
        run_ids_by_slot[(d.job_id, d.slot)].add(d.run_id)
    assert all(len(ids) == 1 for ids in run_ids_by_slot.values()), "a slot delivered under two run ids"

    statuses = Counter(status for _, _, status, _ in runs.values())
    assert set(statuses) <= FINAL, f"unfinished runs: {statuses}"
    for run_id, (_, _, status, attempts) in runs.items():
        if status == "succeeded":
            assert (run_id, attempts) in sent, f"run {run_id} succeeded with an attempt the target never received"
    for job_id in job_ids:
        slots = sorted(slot for job, slot, _, _ in runs.values() if job == job_id)
        assert len(slots) >= RUN_SECONDS - 2, (job_id, slots)
        gaps = [(a, b) for a, b in zip(slots, slots[1:]) if b - a != timedelta(seconds=1)]
        assert gaps == [], f"job {job_id}: slots without a row between {gaps}"
    return {"requests": len(delivered), "runs delivered": len(attempts_by_run), "rows": dict(sorted(statuses.items())),
            "sent again after a kill": after_kill, "sent again after a recorded failure": after_failure}


def _create_job(runtime: LocalRuntime, target: Target, n: int) -> str:
    job = _api(runtime, "POST", "/jobs", {
        "name": f"chaos-{n}", "schedule": "* * * * * *", "overlap": OVERLAPS[n % len(OVERLAPS)],
        "request": {"method": "POST", "url": f"{target.url}/hook/{n}", "body": "{}",
                    "timeout_seconds": REQUEST_TIMEOUT_SECONDS},
        # Half the jobs retry a lost attempt even past their next slot, so a killed run is sent again.
        "retry": {"strategy": "fixed", "max_attempts": 3, "delay_seconds": 1, "jitter": "none",
                  "past_next_run": n % 2 == 0},
    })
    return str(job["id"])


def _api(runtime: LocalRuntime, method: str, path: str, body: Any = None) -> Any:
    request = urllib.request.Request(
        runtime.api_url + path, method=method, data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {runtime.api_key}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read() or b"null")


def _delivered(target: Target) -> list[Delivered]:
    return [Delivered(h["Tickwork-Run-Id"], int(h["Tickwork-Attempt"]), h["Tickwork-Job-Id"],
                      parse_rfc3339(h["Tickwork-Scheduled-For"]))
            for h in (r["headers"] for r in target.requests)]


def _rows(settings: Settings) -> tuple[dict[str, tuple[str, datetime, str, int]], dict[tuple[str, int], str | None]]:
    """Every scheduled run (job, slot, status, attempts), and every recorded attempt's error."""
    with psycopg.connect(settings.database_url) as conn:
        runs = conn.execute("SELECT id::text, job_id::text, scheduled_for, status, attempt_count FROM executions"
                            " WHERE trigger = 'schedule'").fetchall()
        attempts = conn.execute("SELECT execution_id::text, number, error FROM attempts").fetchall()
    return {r[0]: (r[1], r[2], r[3], r[4]) for r in runs}, {(a[0], a[1]): a[2] for a in attempts}


def _unfinished(settings: Settings) -> dict[str, int]:
    with psycopg.connect(settings.database_url) as conn:
        rows = conn.execute("SELECT status, count(*) FROM executions WHERE status <> ALL(%s) GROUP BY status",
                            (list(FINAL),)).fetchall()
    return dict(rows)
