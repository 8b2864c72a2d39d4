"""Batched start and finish of runs against real Postgres: the same rows as the one-run statements."""
from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg

from tests.integration.helpers import insert_job
from tickwork.store import attempts
from tickwork.store import executions as store
from tickwork.store.attempts import AttemptRecord, Finished
from tickwork.vocab import RunStatus
from tickwork.wiring import Services

NOW = datetime.now(timezone.utc)
PAST = NOW - timedelta(hours=1)
FUTURE = NOW + timedelta(hours=1)
REQUEST = {"method": "POST", "url": "http://127.0.0.1:9/hook", "headers": {}, "body": '{"hello":1}',
           "timeout_seconds": 5}


def _job(services: Services, db: psycopg.Connection, overlap: str = "allow") -> str:
    job_id = insert_job(services, schedule="0 0 1 1 *", next_run_at=PAST, index=False)
    db.execute("UPDATE jobs SET overlap = %s WHERE id = %s", (overlap, job_id))
    return job_id


def _run(db: psycopg.Connection, job_id: str, status: str = "queued", attempt_count: int = 0,
         scheduled_for: datetime = PAST, **columns: Any) -> str:
    """An executions row as the poller (and earlier attempts) would have left it."""
    execution_id = str(uuid.uuid4())
    values = {"status": status, "attempt_count": attempt_count, "scheduled_for": scheduled_for, **columns}
    names = ", ".join(values)
    db.execute(
        f"INSERT INTO executions (id, tenant_id, job_id, trigger, {names})"
        f" SELECT %s, tenant_id, id, 'schedule', {', '.join(['%s'] * len(values))} FROM jobs WHERE id = %s",
        (execution_id, *values.values(), job_id),
    )
    return execution_id


def _row(db: psycopg.Connection, execution_id: str) -> tuple[Any, ...]:
    return db.execute(
        "SELECT status, attempt_count, started_at, attempt_started_at, next_attempt_at, finished_at, last_error"
        " FROM executions WHERE id = %s", (execution_id,),
    ).fetchone()


def _attempts(db: psycopg.Connection, execution_id: str) -> list[tuple[Any, ...]]:
    return db.execute(
        "SELECT number, started_at, duration_ms, status_code, response_body, error FROM attempts"
        " WHERE execution_id = %s ORDER BY number", (execution_id,),
    ).fetchall()


class CountingConnection:
    """The real connection, counting the statements sent through it."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn
        self.statements = 0

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        self.statements += 1
        return self.conn.execute(*args, **kwargs)


def test_start_many_starts_what_start_unguarded_would_and_nothing_else(services: Services, db: Any) -> None:
    allow, skip = _job(services, db), _job(services, db, overlap="skip")
    first = _run(db, allow)
    second = _run(db, allow, scheduled_for=PAST + timedelta(seconds=1))
    guarded_first = _run(db, skip)  # needs the overlap lock: start_guarded decides it
    retry = _run(db, skip, status="retrying", attempt_count=1, scheduled_for=PAST + timedelta(seconds=1),
                 started_at=PAST, next_attempt_at=PAST + timedelta(minutes=1))
    stale = _run(db, allow, status="retrying", attempt_count=2, scheduled_for=PAST + timedelta(seconds=2),
                 started_at=PAST, next_attempt_at=FUTURE)  # attempt 2 redelivered after attempt 2 ran
    running = _run(db, allow, status="running", attempt_count=1, scheduled_for=PAST + timedelta(seconds=3),
                   started_at=PAST, attempt_started_at=PAST)  # a duplicate delivery of attempt 1
    runs = [(first, 1), (second, 1), (guarded_first, 1), (retry, 2), (stale, 2), (running, 1)]

    started = store.start_unguarded_many(db, runs)

    assert set(started) == {first, second, retry}
    assert (started[first].job_id, started[first].attempt, started[first].overlap) == (allow, 1, "allow")
    assert (started[retry].job_id, started[retry].attempt, started[retry].overlap) == (skip, 2, "skip")
    assert started[retry].scheduled_for == PAST + timedelta(seconds=1) and started[retry].request == REQUEST
    assert [_row(db, r)[:2] for r in (first, second, retry)] == [("running", 1), ("running", 1), ("running", 2)]
    assert _row(db, guarded_first)[:3] == ("queued", 0, None)
    assert _row(db, stale)[:2] == ("retrying", 2) and _row(db, stale)[4] == FUTURE
    assert _row(db, running)[:4] == ("running", 1, PAST, PAST)
    assert store.start_unguarded_many(db, runs) == {}  # the same batch again: all duplicates now


def test_start_many_records_the_times_start_unguarded_records(services: Services, db: Any) -> None:
    batch_job, single_job = _job(services, db), _job(services, db)
    shapes: list[dict[str, Any]] = [
        {"scheduled_for": PAST},  # late: sent now
        {"scheduled_for": FUTURE},  # started within the lookahead: sent at its instant
        {"status": "retrying", "attempt_count": 1, "scheduled_for": PAST + timedelta(seconds=1),
         "started_at": PAST, "next_attempt_at": FUTURE},  # retry started early: first start kept
    ]
    batch = [_run(db, batch_job, **shape) for shape in shapes]
    single = [_run(db, single_job, **shape) for shape in shapes]
    with db.transaction():  # one now() for both forms
        now = db.execute("SELECT now()").fetchone()[0]
        started = store.start_unguarded_many(db, [(batch[0], 1), (batch[1], 1), (batch[2], 2)])
        one_by_one = [store.start_unguarded(db, run, attempt) for run, attempt in zip(single, (1, 1, 2))]

    assert [started[run].attempt for run in batch] == [run.attempt for run in one_by_one if run] == [1, 1, 2]
    assert [_row(db, run) for run in batch] == [_row(db, run) for run in single]
    assert [_row(db, run)[2:5] for run in batch] == [
        (now, now, None), (FUTURE, FUTURE, None), (PAST, FUTURE, None),
    ]


def test_finish_many_records_the_runs_still_ours_and_only_those(services: Services, db: Any) -> None:
    job = _job(services, db)
    running = {"status": "running", "attempt_count": 1, "started_at": PAST, "attempt_started_at": PAST}
    ok, failed, retrying, stale = (
        _run(db, job, scheduled_for=PAST + timedelta(seconds=i), **running) for i in range(4))
    lost = _run(db, job, scheduled_for=FUTURE, status="lost", attempt_count=1, started_at=PAST,
                finished_at=PAST, last_error="lost: executor did not report within 60 s")  # by the sweeper
    db.execute("UPDATE executions SET attempt_count = 2 WHERE id = %s", (stale,))  # attempt 2 runs now
    again = NOW + timedelta(seconds=30)
    records = {
        ok: AttemptRecord(1, NOW, 12, 200, "ok", None),
        failed: AttemptRecord(1, NOW, 7, 404, "not here", "HTTP 404"),
        retrying: AttemptRecord(1, NOW, 5000, None, None, "timed out after 5 s"),
        lost: AttemptRecord(1, NOW, 61000, 200, "late", None),
        stale: AttemptRecord(1, NOW, 3, 200, "ok", None),
    }
    statuses = {ok: ("succeeded", None), failed: ("failed", None), retrying: ("retrying", again),
                lost: ("succeeded", None), stale: ("succeeded", None)}
    with db.transaction():
        now = db.execute("SELECT now()").fetchone()[0]
        kept = attempts.finish_attempts(db, [Finished(run, records[run], *statuses[run]) for run in records])

    assert kept == {ok, failed, retrying}
    assert _row(db, ok)[4:] == (None, now, None)
    assert _row(db, failed)[4:] == (None, now, "HTTP 404")
    assert _row(db, retrying)[:2] == ("retrying", 1) and _row(db, retrying)[4:] == (again, None, "timed out after 5 s")
    assert _attempts(db, ok) == [(1, NOW, 12, 200, "ok", None)]
    assert _attempts(db, failed) == [(1, NOW, 7, 404, "not here", "HTTP 404")]
    assert _attempts(db, retrying) == [(1, NOW, 5000, None, None, "timed out after 5 s")]
    assert _row(db, lost)[0] == "lost" and _row(db, lost)[5:] == (PAST, "lost: executor did not report within 60 s")
    assert _row(db, stale)[:2] == ("running", 2) and _row(db, stale)[5] is None
    assert _attempts(db, lost) == [] and _attempts(db, stale) == []


def test_empty_batches_send_nothing(db: Any) -> None:
    counting = CountingConnection(db)
    assert store.start_unguarded_many(counting, []) == {}
    assert attempts.finish_attempts(counting, []) == set()
    assert counting.statements == 0


def test_two_hundred_runs_start_and_finish_in_one_statement_each(services: Services, db: Any) -> None:
    job = _job(services, db)
    runs = [_run(db, job, scheduled_for=PAST + timedelta(seconds=i)) for i in range(200)]
    counting = CountingConnection(db)

    started = store.start_unguarded_many(counting, [(run, 1) for run in runs])
    assert (len(started), counting.statements) == (200, 1)
    results = [Finished(run, AttemptRecord(1, NOW, i, 200, str(i), None), RunStatus.SUCCEEDED)
               for i, run in enumerate(runs)]
    assert attempts.finish_attempts(counting, results) == set(runs)
    assert counting.statements == 2

    assert db.execute("SELECT status, count(*) FROM executions WHERE job_id = %s GROUP BY status",
                      (job,)).fetchall() == [("succeeded", 200)]
    assert db.execute("SELECT count(*), sum(duration_ms) FROM attempts").fetchone() == (200, sum(range(200)))
