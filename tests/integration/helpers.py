"""Small builders for integration tests: real rows in the test schema, real keys in the test namespace."""
from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support import FakeClock
from tickwork.dueindex import specs as dueindex_specs
from tickwork.dueindex.index import DueIndex
from tickwork.runs.executor import Executor, http_client
from tickwork.settings import Settings
from tickwork.store import jobs as jobs_store
from tickwork.store.tenants import create_tenant, find_tenant
from tickwork.wiring import Services

# Between polls of the API in wait_for: 5 requests a second, far under the per-key rate limit (20/s).
API_POLL_INTERVAL = 0.2
ROOT = Path(__file__).resolve().parents[2]
# `python -m tickwork_local` prints its URL and key within seconds; a start that takes longer has hung.
STARTUP_TIMEOUT_SECONDS = 30


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
        dueindex_specs.index_job(due_index(svc), job)
    return job_id


def due_index(svc: Services) -> DueIndex:
    return svc.index


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


def executor_at(svc: Services, clock: FakeClock) -> Executor:
    """An executor whose every clock read and wait goes through `clock`."""
    return Executor(svc, http_client(), clock=clock.time, sleep=clock.sleep)




def start_process(
    settings: Settings, data_dir: Path, port: int, env: dict[str, str] | None = None,
) -> tuple[subprocess.Popen[bytes], str, str]:
    """`python -m tickwork_local` in the test's schema and key namespace, with `env` on top; returns it
    with its URL and key. What it prints goes to data_dir/stdout.log (a pipe nobody reads would fill up
    and stop it)."""
    environ = {k: v for k, v in os.environ.items() if k != "TICKWORK_DEV_API_KEY"}
    environ.update(DATABASE_URL=settings.database_url, REDIS_URL=settings.redis_url,
                   TICKWORK_NAMESPACE=settings.namespace, TICKWORK_DATA_DIR=str(data_dir), TICKWORK_PORT=str(port))
    environ.update(env or {})
    data_dir.mkdir(parents=True, exist_ok=True)
    log = data_dir / "stdout.log"
    with log.open("ab") as out:
        offset = out.tell()
        process = subprocess.Popen([sys.executable, "-m", "tickwork_local"], cwd=ROOT, env=environ, stdout=out,
                                   stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
    while time.monotonic() < deadline and process.poll() is None:
        printed = log.read_bytes()[offset:].decode(errors="replace")
        url, key = _match(r"^\s+API\s+(http://\S+)", printed), _match(r"^\s+API key\s+(\S+)", printed)
        if url and key:
            return process, url, key
        time.sleep(0.05)
    process.kill()
    process.wait(5)
    pytest.fail(f"tickwork_local did not print its API URL and key ({process.returncode})")


def _match(pattern: str, text: str) -> str:
    found = re.search(pattern, text, re.MULTILINE)
    return found.group(1) if found else ""


def stop_process(process: subprocess.Popen[Any], signum: int) -> int:
    process.send_signal(signum)
    try:
        return process.wait(10)
    finally:
        if process.poll() is None:
            process.kill()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# How long UnreadTarget waits before it reads anyway, so that a test it fails still ends: longer than the
# timeouts of the runs sent to it.
UNREAD_SECONDS = 20
# Inside the API's 64 Ki characters; 240 KB of UTF-8, more than a sender's socket queues for a target not reading.
BIG_BODY = "\U0001f4e6" * 60_000


class UnreadTarget:
    """A target that takes connections and reads nothing until `reading` is set, then reads each request and
    answers 200. A request larger than its receive buffer (a few KiB) and what the sender's socket queues
    (sized by the segment size, which it sets to an Internet path's: about 100 KB) blocks the write. With
    `tls` it completes each TLS handshake at once, then waits likewise."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.reading = threading.Event()
        self.tls = tls
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # accepted connections inherit it
        self.listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 1460)  # not loopback's 64 KiB segments
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.listener.getsockname()[1]}"
        self.requests_read = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = self.listener.accept()
                threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            conn = self.tls.wrap_socket(conn, server_side=True) if self.tls else conn
        self.reading.wait(UNREAD_SECONDS)
        with conn, contextlib.suppress(OSError):
            file = conn.makefile("rb")
            length = next(int(line.split(b":")[1]) for line in iter(file.readline, b"")
                          if line.lower().startswith(b"content-length:"))
            while file.readline() not in (b"\r\n", b""):
                pass
            file.read(length)
            self.requests_read += 1
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")

    def close(self) -> None:
        self.reading.set()
        self.listener.close()

