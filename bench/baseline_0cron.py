"""The per-job design of ../shared/reference/0cron-scheduler-engine.txt, in Python, as a yardstick.

Each poll: ZRANGEBYSCORE scheduled_jobs 0 <now, whole seconds>; for every due job SET lock:<id> 1 NX
EX 60, then ZREM, then a task that reads the job (one SELECT), sends the request, records the run (one
INSERT), computes the next run from *now*, ZADDs it back and updates next_run_at.

Same Redis, same Postgres, same target, same HTTP code (tickwork.http.delivery's prepare, fire and complete over keep-alive
tickwork.http.delivery.Connections, as the executor), same schedule engine, tasks on a thread pool as wide as Tickwork's executor
pool. Where the article is silent or harsh, the baseline is given the benefit of the doubt:
- polls start at each whole second (the article sleeps one second after each poll, which drifts);
- the lock is deleted once the job is back in the set (the article never shows a release: with a
  60 s lock a per-second job would run once a minute);
- the ZRANGEBYSCORE asks WITHSCORES so each run knows its slot (same round trip).
"""
from __future__ import annotations

import contextlib
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Sequence

import redis

from bench.burst import check_ahead, due_second
from bench.executors import MIN_DB_POOL, MIN_WIDTH, WorkerProcesses, split
from bench.harness import (
    EVERY_SECOND,
    INDEX_CHUNK,
    ONCE_A_DAY,
    SecondTicker,
    Servers,
    Workspace,
    chunks,
    insert_jobs,
    tick_stats,
    wait_for,
)
from bench.outcome import summarize
from bench.target import Target
from tickwork.http import delivery
from tickwork.schedule import specs as scheduling
from tickwork.settings import Settings
from tickwork.store import jobs as jobs_store
from tickwork.timeutil import rfc3339
from tickwork.wiring import connect_db

LOCK_TTL_SECONDS = 60

_RUNS_TABLE = """
CREATE TABLE IF NOT EXISTS runs_0cron (
    id            uuid PRIMARY KEY,
    job_id        uuid NOT NULL,
    scheduled_for timestamptz NOT NULL,
    sent_at       timestamptz NOT NULL,
    status_code   integer,
    duration_ms   integer NOT NULL,
    response_body text,
    error         text
)
"""

_INSERT_RUN = (
    "INSERT INTO runs_0cron (id, job_id, scheduled_for, sent_at, status_code, duration_ms, response_body, error)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
)

_SEND_LAGS = """
SELECT extract(epoch FROM r.sent_at - r.scheduled_for) * 1000
  FROM runs_0cron r JOIN jobs j ON j.id = r.job_id
 WHERE j.name LIKE %(prefix)s AND r.scheduled_for BETWEEN to_timestamp(%(lo)s) AND to_timestamp(%(hi)s)
"""


@dataclass
class PollResult:
    due: int
    locked: int
    redis_round_trips: int
    seconds: float


class BaselineTasks:
    """What a 0cron task does with a due job, and the clients it does it with (one set per process)."""

    def __init__(self, settings: Settings, key: str, lock_prefix: str, db_pool_size: int) -> None:
        self.key = key
        self._lock_prefix = lock_prefix
        self.redis = redis.Redis.from_url(settings.redis_url, decode_responses=True)
        self.db = connect_db(settings, db_pool_size)
        self.http = delivery.Connections()  # keep-alive connections, as tickwork.runs.executor.http_client()

    def handle(self, task: tuple[str, int]) -> None:
        """A task from a worker process's queue: (job id, slot second)."""
        self.execute(*task)

    def close(self) -> None:
        self.db.close()
        self.redis.close()

    def execute(self, job_id: str, slot_second: int) -> None:
        with self.db.connection() as conn:
            found = jobs_store.get_jobs(conn, [job_id])
        if not found or found[0].status != "active":
            return
        job = found[0]
        slot = datetime.fromtimestamp(slot_second, tz=timezone.utc)
        sent_at = time.time()
        request = job.request.to_dict()  # the typed job's request, as the executor hands it to delivery
        prepared = delivery.prepare(self.http, request, _headers(job_id, slot), float(request["timeout_seconds"]))
        prepared.fire()
        outcome = prepared.complete()
        with self.db.connection() as conn:
            conn.execute(_INSERT_RUN, (str(uuid.uuid4()), job_id, slot, datetime.fromtimestamp(sent_at, tz=timezone.utc),
                                       outcome.status_code, outcome.duration_ms, outcome.body, outcome.error))
        self._reschedule(job)

    def _reschedule(self, job: Any) -> None:
        """compute_next_run from now, ZADD it back, UPDATE next_run_at, then (our addition) free the lock."""
        nxt = scheduling.job_schedule(job).next_after(datetime.now(timezone.utc))
        if nxt is None:
            return
        self.redis.zadd(self.key, {job.id: int(nxt.timestamp())})
        with self.db.connection() as conn:
            conn.execute("UPDATE jobs SET next_run_at = %s WHERE id = %s", (nxt, job.id))
        self.redis.delete(self._lock_prefix + job.id)


def _task_process(arg: tuple[Settings, str, str, int]) -> BaselineTasks:
    """A worker process's BaselineTasks (bench/executors.py builds it in each child)."""
    return BaselineTasks(*arg)


class Baseline:
    """The poll loop, in this process; its tasks on a thread pool here (processes=0) or, like Tickwork's
    executors with executor processes, in `processes` worker processes (workers and connections shared out)."""

    def __init__(
        self, ws: Workspace, workers: int, db_pool_size: int, execute: bool = True, processes: int = 0,
    ) -> None:
        self.execute = execute  # False: the poll loop alone, its tasks counted but not run
        self.key = ws.key("0cron:scheduled_jobs")
        self._lock_prefix = ws.key("0cron:lock:")
        self.redis = redis.Redis.from_url(ws.servers.redis_url, decode_responses=True)
        self.tasks: BaselineTasks | None = None
        self.pool: ThreadPoolExecutor | None = None
        self.processes: WorkerProcesses | None = None
        with ws.connect() as conn:
            conn.execute(_RUNS_TABLE)
        if execute and processes > 0:
            arg = (ws.settings, self.key, self._lock_prefix, split(db_pool_size, processes, MIN_DB_POOL))
            self.processes = WorkerProcesses(_task_process, arg, processes, split(workers, processes, MIN_WIDTH),
                                             "0cron").start()
        elif execute:
            self.tasks = BaselineTasks(ws.settings, self.key, self._lock_prefix, db_pool_size)
            self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="0cron")
        self.submitted = 0
        self._done = 0
        self._errors: list[str] = []
        self.first_submit_at: float | None = None
        self.last_submit_at: float | None = None
        self._count_lock = threading.Lock()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
        if self.tasks is not None:
            self.tasks.close()
        if self.processes is not None:
            self.processes.close()
        self.redis.close()

    @property
    def done(self) -> int:
        return self.processes.runs_done if self.processes is not None else self._done

    @property
    def errors(self) -> list[str]:
        return self.processes.errors if self.processes is not None else self._errors

    def schedule(self, job_ids: Sequence[str], at_second: int) -> None:
        """ZADD the jobs at a whole second, as 0cron's schedule_job does (scores in seconds)."""
        for chunk in chunks(job_ids, INDEX_CHUNK):
            self.redis.zadd(self.key, {job_id: at_second for job_id in chunk})

    def poll(self, now_ms: int) -> PollResult:
        started = time.time()
        due = self.redis.zrangebyscore(self.key, 0, now_ms // 1000, withscores=True)
        locked = 0
        for job_id, score in due:
            if not self.redis.set(self._lock_prefix + job_id, "1", nx=True, ex=LOCK_TTL_SECONDS):
                continue  # another instance holds it
            self.redis.zrem(self.key, job_id)
            if self.processes is not None:
                self.processes.submit((job_id, int(score)), 1)
            elif self.pool is not None:
                self.pool.submit(self._task, job_id, int(score))
            locked += 1
            self._note_submit()
        return PollResult(len(due), locked, 1 + 2 * locked, time.time() - started)

    def spreading(self) -> contextlib.AbstractContextManager[None]:
        """Around a warm-up poll: with worker processes, every one of them gets its share of the tasks."""
        return self.processes.spreading() if self.processes is not None else contextlib.nullcontext()

    def _note_submit(self) -> None:
        now = time.time()
        with self._count_lock:
            self.submitted += 1
            self.first_submit_at = self.first_submit_at or now
            self.last_submit_at = now

    def _task(self, job_id: str, slot_second: int) -> None:
        assert self.tasks is not None
        try:
            self.tasks.execute(job_id, slot_second)
        except Exception as exc:  # tokio would log it; the benchmark counts it
            with self._count_lock:
                self._errors.append(repr(exc))
        finally:
            with self._count_lock:
                self._done += 1

    def idle(self) -> bool:
        return not self.execute or self.done >= self.submitted

    def drain(self, timeout: float) -> bool:
        return wait_for(self.idle, timeout)

    def reset_counts(self) -> None:
        with self._count_lock:
            self.submitted = self._done = 0
            self.first_submit_at = self.last_submit_at = None
            self._errors = []
        if self.processes is not None:
            self.processes.reset()

    def send_lags(self, conn: Any, name: str, window: tuple[float, float]) -> list[float]:
        params = {"prefix": f"{name}-%", "lo": window[0], "hi": window[1]}
        return [float(row[0]) for row in conn.execute(_SEND_LAGS, params)]


def _headers(job_id: str, slot: datetime) -> dict[str, str]:
    return {"Tickwork-Run-Id": str(uuid.uuid4()), "Tickwork-Job-Id": job_id, "Tickwork-Attempt": "1",
            "Tickwork-Scheduled-For": rfc3339(slot) or ""}


# Per run, beyond the poll's ZRANGEBYSCORE: SET NX + ZREM in the poll, ZADD + DEL in the task (Redis);
# SELECT, INSERT, UPDATE in the task (Postgres).
REDIS_ROUND_TRIPS_PER_RUN = 4
POSTGRES_ROUND_TRIPS_PER_RUN = 3


# ---------------------------------------------------------------- the workloads, as burst.py and steady.py run them

DRAIN_TIMEOUT_SECONDS = 60
WARM_UP_JOBS = 200


def _warm_up(ws: Workspace, base: Baseline, target: Target) -> None:
    job_ids = insert_jobs(ws, WARM_UP_JOBS, ONCE_A_DAY, (int(time.time()) - 1) * 1000, target.url, "warmup")
    base.schedule(job_ids, int(time.time()) - 1)
    with base.spreading():
        base.poll(int(time.time() * 1000))
    base.drain(DRAIN_TIMEOUT_SECONDS)
    wait_for(lambda: target.count() >= WARM_UP_JOBS, 10)
    target.take()
    base.reset_counts()


def run_burst(
    servers: Servers, target: Target, jobs: int, workers: int, db_pool: int, execute: bool = True,
    processes: int = 0,
) -> dict[str, Any]:
    with Workspace(servers, "burst0cron") as ws:
        base = Baseline(ws, workers, db_pool, execute, processes)
        try:
            if execute:
                _warm_up(ws, base, target)
            due = due_second(jobs)
            job_ids = insert_jobs(ws, jobs, ONCE_A_DAY, due * 1000, target.url, "bench")
            base.schedule(job_ids, due)
            check_ahead(due)
            ticker = SecondTicker(base.poll, due, due + 1).start()
            ticker.join()
            drained = base.drain(DRAIN_TIMEOUT_SECONDS)
            if execute:
                wait_for(lambda: target.count() >= jobs, 5)
            tick = ticker.ticks[0] if ticker.ticks else None
            result = _outcome(ws, base, target, job_ids, (due, due), 1, drained)
            result.update({
                "tick": tick.result.__dict__ if tick else {},
                "tick_seconds": tick.seconds if tick else None,
                "dispatch_seconds": None if tick is None or base.last_submit_at is None
                else base.last_submit_at - tick.started,
                "all_arrived_after_due_seconds": _after(due, result["deliveries"]["last_arrival"]),
            })
            return result
        finally:
            base.close()


def run_steady(
    servers: Servers, target: Target, jobs: int, seconds: int, workers: int, db_pool: int, processes: int = 0,
) -> dict[str, Any]:
    with Workspace(servers, "steady0cron") as ws:
        base = Baseline(ws, workers, db_pool, processes=processes)
        try:
            _warm_up(ws, base, target)
            start = due_second(jobs)
            job_ids = insert_jobs(ws, jobs, EVERY_SECOND, start * 1000, target.url, "bench")
            base.schedule(job_ids, start)
            check_ahead(start)
            ticker = SecondTicker(base.poll, start, start + seconds - 1).start()
            ticker.join()
            drained = base.drain(DRAIN_TIMEOUT_SECONDS)
            result = _outcome(ws, base, target, job_ids, (start, start + seconds - 1), seconds, drained)
            result["ticks"] = tick_stats([t.seconds for t in ticker.ticks], seconds)
            result["poll_due_per_tick"] = [t.result.due for t in ticker.ticks if t.result is not None][:5]
            return result
        finally:
            base.close()


def _outcome(
    ws: Workspace, base: Baseline, target: Target, job_ids: list[str], window: tuple[int, int], per_job: int,
    drained: bool,
) -> dict[str, Any]:
    arrivals = target.take()
    with ws.connect() as conn:
        lags = base.send_lags(conn, "bench", window)
    deliveries = summarize(arrivals, set(job_ids), window, per_job, lags)
    by_process = None if base.processes is None else sorted(base.processes.done_by_pid.values(), reverse=True)
    return {"task_processes": 0 if base.processes is None else base.processes.processes, "tasks_by_process": by_process,
            "deliveries": deliveries.as_dict(), "drained": drained, "submitted": base.submitted,
            "errors": base.errors[:3], "error_count": len(base.errors)}


def _after(start: float, end: float | None) -> float | None:
    return None if end is None else end - start
