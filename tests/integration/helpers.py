"""Small builders for integration tests: real rows in the test schema, real keys in the test namespace."""
from __future__ import annotations

import json
import threading
import time
import uuid
from datetime import datetime, timedelta
from typing import Any, Callable

from tickwork import scheduling
from tickwork.dueindex import DueIndex
from tickwork.executor import Executor, http_client
from tickwork.store import jobs as jobs_store
from tickwork.store.tenants import create_tenant, find_tenant
from tickwork.wiring import Services

# Between polls of the API in wait_for: 5 requests a second, far under the per-key rate limit (20/s).
API_POLL_INTERVAL = 0.2


def insert_job(
    svc: Services, *, schedule: str, next_run_at: datetime, url: str = "http://127.0.0.1:9/hook",
    tenant_id: str | None = None, status: str = "active", retry: dict[str, Any] | None = None,
    method: str = "POST", body: str | None = '{"hello":1}', headers: dict[str, str] | None = None,
    index: bool = True, timeout_seconds: int = 5,
) -> str:
    """A job row written straight to Postgres (as the API would) and indexed in Redis."""
    job_id = str(uuid.uuid4())
    request = {"method": method, "url": url, "headers": headers or {}, "body": body, "timeout_seconds": timeout_seconds}
    with svc.db.connection() as conn:
        tenant_id = tenant_id or find_tenant(conn, "t") or create_tenant(conn, "t")
        conn.execute(
            "INSERT INTO jobs (id, tenant_id, name, schedule, timezone, request, retry, status, next_run_at)"
            " VALUES (%s, %s, %s, %s, 'UTC', %s, %s, %s, %s)",
            (job_id, tenant_id, "job", schedule, json.dumps(request),
             json.dumps(retry or {"strategy": "fixed", "max_attempts": 3, "delay_seconds": 1}), status, next_run_at),
        )
        job = jobs_store.get_jobs(conn, [job_id])[0]
    if index:
        scheduling.index_job(due_index(svc), job)
    return job_id


def due_index(svc: Services) -> DueIndex:
    return DueIndex(svc.redis, svc.settings.namespace, svc.settings.due_index_shards)


def executions(svc: Services, job_id: str) -> list[tuple[Any, ...]]:
    with svc.db.connection() as conn:
        return conn.execute(
            "SELECT id::text, scheduled_for, status, attempt_count, trigger FROM executions"
            " WHERE job_id = %s ORDER BY scheduled_for", (job_id,),
        ).fetchall()


def attempts(svc: Services, execution_id: str) -> list[tuple[Any, ...]]:
    with svc.db.connection() as conn:
        return conn.execute(
            "SELECT number, started_at, duration_ms, status_code, error FROM attempts"
            " WHERE execution_id = %s ORDER BY number", (execution_id,),
        ).fetchall()


class FakeClock:
    """Reads `at` and moves only when slept on: an executor on it sends at its runs' exact instants, at
    whatever date the test chose, however slow the machine."""

    def __init__(self, at: datetime) -> None:
        self.at = at
        self.slept: list[float] = []
        self._lock = threading.Lock()

    def time(self) -> float:
        with self._lock:
            return self.at.timestamp()

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.slept.append(seconds)
            self.at += timedelta(seconds=seconds)


def executor_at(svc: Services, clock: FakeClock) -> Executor:
    """An executor whose every clock read and wait goes through `clock`."""
    return Executor(svc, http_client(), clock=clock.time, sleep=clock.sleep)


def wait_for(condition: Callable[[], bool], timeout: float = 10.0, interval: float = 0.01) -> bool:
    """Poll until `condition()` holds (True) or `timeout` seconds pass (False): for work in other threads.

    A condition that calls the API must poll slower than its rate limit (see API_POLL_INTERVAL)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True

