"""What Tickwork recorded of the interop jobs, read from its tables, and each run set beside its arrivals."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Sequence

import psycopg

from tests.interop.shapes import Arrival
from tickwork.timeutil import rfc3339

FINAL_STATUSES = ("succeeded", "failed", "lost", "skipped", "missed")


@dataclass(frozen=True)
class Attempt:
    number: int
    started_at: datetime
    status_code: int | None
    body: str | None
    error: str | None

    def __str__(self) -> str:
        answer = "no answer" if self.status_code is None else f"HTTP {self.status_code}"
        return f"{self.number}: {answer}" + (f", {self.error!r}" if self.error else "")


@dataclass
class Run:
    id: str
    job_id: str
    scheduled_for: datetime
    status: str
    attempt_count: int
    last_error: str | None = None
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.status in FINAL_STATUSES

    @property
    def stopped_by_pause(self) -> bool:
        """Skipped, unsent, because its job was paused before its instant (the suite pauses every job)."""
        return (self.status == "skipped" and not self.attempts
                and (self.last_error or "").startswith("skipped: the job was paused"))

    @property
    def lag_seconds(self) -> float | None:
        """How late its first attempt was sent."""
        first = next((a for a in self.attempts if a.number == 1), None)
        return None if first is None else (first.started_at - self.scheduled_for).total_seconds()

    def describe(self, arrivals: Sequence[Arrival]) -> str:
        mine = [a.attempt for a in arrivals if a.run_id == self.id]
        return (f"run {rfc3339(self.scheduled_for)} ({self.id}): {self.status} after {self.attempt_count} attempt(s)"
                f" [{'; '.join(str(a) for a in self.attempts)}]; arrived {len(mine)} time(s)"
                + (f" (Tickwork-Attempt {', '.join(mine)})" if mine else ""))


def load_runs(database_url: str, job_ids: Sequence[str]) -> dict[str, list[Run]]:
    """Each job's runs in slot order, with their attempts."""
    runs: dict[str, Run] = {}
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT e.id::text, e.job_id::text, e.scheduled_for, e.status, e.attempt_count, e.last_error,"
            " a.number, a.started_at, a.status_code, a.response_body, a.error"
            " FROM executions e LEFT JOIN attempts a ON a.execution_id = e.id"
            " WHERE e.job_id = ANY(%s::uuid[]) ORDER BY e.scheduled_for, e.id, a.number", (list(job_ids),),
        ).fetchall()
    for run_id, job_id, scheduled_for, status, count, note, number, started_at, code, body, error in rows:
        run = runs.setdefault(run_id, Run(run_id, job_id, scheduled_for, status, count, note))
        if number is not None:
            run.attempts.append(Attempt(number, started_at, code, body, error))
    by_job: dict[str, list[Run]] = {job_id: [] for job_id in job_ids}
    for run in runs.values():
        by_job[run.job_id].append(run)
    return by_job


def count_runs(database_url: str, job_ids: Sequence[str]) -> tuple[int, int]:
    """The fewest runs any of the jobs has, and how many of all their runs are not finished."""
    with psycopg.connect(database_url) as conn:
        counts = dict(conn.execute(
            "SELECT job_id::text, count(*) FROM executions WHERE job_id = ANY(%s::uuid[]) GROUP BY job_id",
            (list(job_ids),)).fetchall())
        unfinished = conn.execute(
            "SELECT count(*) FROM executions WHERE job_id = ANY(%s::uuid[]) AND status <> ALL(%s)",
            (list(job_ids), list(FINAL_STATUSES))).fetchone()
    assert unfinished is not None
    return min(counts.get(job_id, 0) for job_id in job_ids), unfinished[0]


def arrival_counts(arrivals: Sequence[Arrival]) -> Counter[str]:
    return Counter(a.run_id for a in arrivals)
