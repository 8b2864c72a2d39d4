"""Targets that answer badly on purpose, through the real executor, a real loopback server and real Postgres:
bytes Postgres text cannot hold, answers that drip for ever, answers that echo the request's secrets.

Each must cost at most its own run, and every run, of every tenant, must end with its true status.
"""
from __future__ import annotations

import socket
import threading
import time
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator

import pytest

from tests.integration.helpers import BIG_BODY, UNREAD_SECONDS, UnreadTarget, insert_job
from tests.support import send, wait_for
from tickwork.dispatch.poller import Poller
from tickwork.http.delivery import Connections, prepare
from tickwork.models import Dispatch
from tickwork.ops.maintenance import run_maintenance
from tickwork.runs.executor import Executor, http_client
from tickwork.runs.sending import BoundedSender
from tickwork.store import executions as executions_store
from tickwork.store import maintenance as maintenance_store
from tickwork.store.tenants import create_tenant
from tickwork.timeutil import to_ms
from tickwork.wiring import Services
from tickwork_local.sending import SharedSender

BINARY = bytes(range(256)) * 2
DRIP_BYTES = 40  # one every DRIP_SECONDS: the whole answer would take 10 s
DRIP_SECONDS = 0.25
SECRET = "s3cr3t-token-0123456789"
QUERY_SECRET = "q-secret-9876543210"


class HostileTarget:
    """A loopback HTTP server whose answer depends on the path: see `_answer`."""

    def __init__(self) -> None:
        self.open_connections = 0
        self.requests_served = 0
        self.drip_stopped: list[float] = []  # when each drip noticed that its client had gone
        self.first_served: dict[str, float] = {}  # path -> time.monotonic() of its first request
        self._lock = threading.Lock()
        target = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                with target._lock:
                    target.open_connections += 1

            def finish(self) -> None:
                with target._lock:
                    target.open_connections -= 1
                super().finish()

            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                if length:
                    self.rfile.read(length)
                target._answer(self)

            do_GET = do_POST = _serve

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        path = handler.path.split("?", 1)[0]
        with self._lock:
            self.requests_served += 1
            self.first_served.setdefault(path, time.monotonic())
        if path in ("/drip", "/drip-head"):
            self._drip(handler, head=path == "/drip-head")
            return
        status, body = {
            "/nul": (200, b"before\x00after"),
            "/latin1": (404, b"caf\xe9 \xff\xfe au lait"),
            "/binary": (200, BINARY),
            "/busy": (503, b"try later"),
            "/refused": (200, b"refused by the test"),
            "/echo": (200, f"{handler.requestline}\r\n{handler.headers}".encode()),
        }.get(path, (200, b"ok"))
        handler.send_response(status)
        handler.send_header("content-length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def _drip(self, handler: BaseHTTPRequestHandler, head: bool) -> None:
        """An answer a byte at a time: its status line and headers (`head`) or its body."""
        answer = f"HTTP/1.1 200 OK\r\ncontent-length: {DRIP_BYTES}\r\n\r\n".encode() + b"x" * DRIP_BYTES
        start = 0 if head else answer.index(b"\r\n\r\n") + 4
        try:
            handler.wfile.write(answer[:start])
            for i in range(start, start + DRIP_BYTES):
                handler.wfile.write(answer[i:i + 1])
                handler.wfile.flush()
                time.sleep(DRIP_SECONDS)
        except OSError:
            pass
        with self._lock:
            self.drip_stopped.append(time.time())
        handler.close_connection = True

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def slot() -> datetime:
    """The run slot of a test whose verdict does not depend on time, taken from the wall clock: the poller
    ticks at it, the executor's clock is pinned to it, and Postgres (its now(), never earlier than the
    slot) starts the run on the same clock."""
    return datetime.now(timezone.utc).replace(microsecond=0)


@pytest.fixture
def hostile() -> Iterator[HostileTarget]:
    server = HostileTarget()
    yield server
    server.close()


def _claim(services: Services, at: datetime) -> list[Dispatch]:
    Poller(services).tick(to_ms(at))
    return list(services.invoker.dispatches)  # type: ignore[union-attr]


def _job(services: Services, url: str, tenant_id: str, at: datetime, **job: Any) -> str:
    return insert_job(services, schedule="0 0 1 1 *", next_run_at=at, url=url, tenant_id=tenant_id,
                      retry={"strategy": "fixed", "max_attempts": 3, "delay_seconds": 30}, **job)


def _runs(services: Services) -> dict[str, tuple[str, int | None, str | None, str | None]]:
    """Each job's URL path: (run status, attempt status code, attempt body, attempt error)."""
    with services.db.connection() as conn:
        rows = conn.execute(
            "SELECT j.request->>'url', e.status, a.status_code, a.response_body, a.error"
            "  FROM executions e JOIN jobs j ON j.id = e.job_id LEFT JOIN attempts a ON a.execution_id = e.id"
        ).fetchall()
    return {url.split("/", 3)[3].split("?")[0]: tuple(row) for url, *row in rows}


def _pinned_executor(services: Services, at: datetime) -> Executor:
    return Executor(services, http_client(), clock=lambda: at.timestamp(), sleep=lambda _: None)


# ---------------------------------------------------------------- bodies Postgres text cannot hold


def test_nul_invalid_utf8_and_binary_answers_end_with_their_true_status_beside_another_tenants_runs(
    services: Services, hostile: HostileTarget, slot: datetime,
) -> None:
    with services.db.connection() as conn:
        first, second = create_tenant(conn, "first"), create_tenant(conn, "second")
    for path in ("nul", "latin1", "binary"):
        _job(services, f"{hostile.url}/{path}", first, slot)
    for path in ("ok", "busy"):
        _job(services, f"{hostile.url}/{path}", second, slot)
    group = _claim(services, slot)
    outcomes = _pinned_executor(services, slot).run(group)
    assert sorted(outcomes) == ["failed", "retrying", "succeeded", "succeeded", "succeeded"]
    assert _runs(services) == {
        "nul": ("succeeded", 200, "[binary body of 12 bytes, not stored]", None),
        "latin1": ("failed", 404, "caf\ufffd \ufffd\ufffd au lait", "HTTP 404"),
        "binary": ("succeeded", 200, f"[binary body of {len(BINARY)} bytes, not stored]", None),
        "ok": ("succeeded", 200, "ok", None),
        "busy": ("retrying", 503, "try later", "HTTP 503"),
    }


def test_a_row_the_database_refuses_costs_only_its_own_body_and_the_batch_is_written_run_by_run(
    services: Services, hostile: HostileTarget, caplog: pytest.LogCaptureFixture, slot: datetime,
) -> None:
    """The refusal comes from a constraint, not from the bytes: the fallback itself is what is tested."""
    with services.db.connection() as conn:
        conn.execute("ALTER TABLE attempts ADD CONSTRAINT test_refuses"
                     " CHECK (response_body IS DISTINCT FROM 'refused by the test')")
        first, second = create_tenant(conn, "first"), create_tenant(conn, "second")
    _job(services, f"{hostile.url}/refused", first, slot)
    # A job that forbids overlap ends through the statement that may release a waiting run: refused too.
    guarded = _job(services, f"{hostile.url}/refused?guarded", first, slot)
    with services.db.connection() as conn:
        conn.execute("UPDATE jobs SET overlap = 'skip' WHERE id = %s", (guarded,))
    for path in ("ok", "busy"):
        _job(services, f"{hostile.url}/{path}", second, slot)
    outcomes = _pinned_executor(services, slot).run(_claim(services, slot))
    assert sorted(outcomes) == ["retrying", "succeeded", "succeeded", "succeeded"]
    note = "response not stored: the database refused it"
    with services.db.connection() as conn:
        refused = conn.execute(
            "SELECT e.id::text, e.status, e.last_error, a.status_code, a.response_body, a.error FROM executions e"
            "  JOIN attempts a ON a.execution_id = e.id JOIN jobs j ON j.id = e.job_id"
            " WHERE j.request->>'url' LIKE '%%/refused%%'").fetchall()
    assert [row[1:] for row in refused] == [("succeeded", note, 200, None, note)] * 2
    runs = _runs(services)
    assert runs["ok"] == ("succeeded", 200, "ok", None)
    assert runs["busy"] == ("retrying", 503, "try later", "HTTP 503")
    # Operators see which attempts lost their body, and never the body (the database's error quotes it).
    warned = [r for r in caplog.records if r.getMessage() == "attempt stored without its response"]
    assert len(warned) == 2 and all(getattr(r, "reason") == "CheckViolation" for r in warned)
    assert {getattr(r, "execution_id") for r in warned} == {row[0] for row in refused}
    assert "refused by the test" not in caplog.text


# ---------------------------------------------------------------- a total deadline


@pytest.mark.parametrize("path", ["/drip", "/drip-head"])
def test_an_answer_dripping_a_byte_at_a_time_ends_the_attempt_at_its_timeout(hostile: HostileTarget, path: str) -> None:
    began = time.monotonic()
    outcome = send(Connections(), {"url": hostile.url + path}, {}, timeout=2)
    elapsed = time.monotonic() - began
    expected = "no response" if path == "/drip-head" else "the response (HTTP 200) did not finish"
    assert outcome.status_code is None and outcome.error == f"timeout: {expected} within 2s"
    # The whole answer would take 10 s; the margin is for a loaded machine.
    assert elapsed < 2 + 1.5, elapsed


def test_the_local_shared_sender_reads_every_answer_and_ends_silent_and_dripping_ones_at_their_timeout(
    services: Services, hostile: HostileTarget, slot: datetime,
) -> None:
    """SharedSender (make dev) waits for responses on its one reader thread, not a thread per request:
    an answer is read once its bytes arrive, and a target that never answers, or answers a byte at a
    time, still ends at the attempt's deadline."""
    silent = socket.create_server(("127.0.0.1", 0))  # connections complete in the kernel; nothing answers
    shared = SharedSender()
    try:
        with services.db.connection() as conn:
            tenant = create_tenant(conn, "local")
        for path in ("ok", "busy", "echo", "drip", "drip-head"):
            _job(services, f"{hostile.url}/{path}", tenant, slot, timeout_seconds=2)
        _job(services, f"http://127.0.0.1:{silent.getsockname()[1]}/silent", tenant, slot, timeout_seconds=2)
        began = time.monotonic()
        outcomes = _pinned_executor(replace(services, sender=shared), slot).run(_claim(services, slot))
        elapsed = time.monotonic() - began
    finally:
        shared.close()
        silent.close()
    assert sorted(outcomes) == ["retrying"] * 4 + ["succeeded"] * 2
    runs = _runs(services)
    assert runs["ok"] == ("succeeded", 200, "ok", None)
    assert runs["busy"] == ("retrying", 503, "try later", "HTTP 503")
    assert runs["echo"][:2] == ("succeeded", 200) and runs["echo"][2].startswith("POST /echo HTTP/1.1")
    assert [runs[path] for path in ("drip", "drip-head", "silent")] == [
        ("retrying", None, None, "timeout: the response (HTTP 200) did not finish within 2s"),
        ("retrying", None, None, "timeout: no response within 2s"),
        ("retrying", None, None, "timeout: no response within 2s"),
    ]
    assert elapsed < 2 + 1.5, elapsed  # the answers would take 10 s, or never come; margin for a loaded machine


def test_runs_whose_target_never_opens_a_connection_hold_back_no_other_run_of_their_group(
    services: Services, hostile: HostileTarget, slot: datetime,
) -> None:
    """A host that drops connection attempts (a full accept queue stands in for it) holds each of its runs
    for the whole timeout while it connects. More of them than the group has threads, ahead of another
    tenant's run in the same group, must not hold that run back: it is sent well before they end."""
    dropping = socket.create_server(("127.0.0.1", 0), backlog=0)
    filler = socket.create_connection(dropping.getsockname())  # the queue is full: further attempts hang
    try:
        with services.db.connection() as conn:
            first, second = create_tenant(conn, "first"), create_tenant(conn, "second")
        for n in range(3):
            _job(services, f"http://127.0.0.1:{dropping.getsockname()[1]}/dropped-{n}", first, slot,
                 timeout_seconds=4)
        ok_job = _job(services, f"{hostile.url}/ok", second, slot)
        claimed = _claim(services, slot)
        with services.db.connection() as conn:
            (ok_run,) = conn.execute("SELECT id::text FROM executions WHERE job_id = %s", (ok_job,)).fetchone()
        # The other tenant's run last: the group readies its runs in this order, on 2 threads.
        group = sorted(claimed, key=lambda dispatch: dispatch.execution_id == ok_run)
        began = time.monotonic()
        outcomes = _pinned_executor(replace(services, sender=BoundedSender(width=2)), slot).run(group)
        elapsed = time.monotonic() - began
    finally:
        filler.close()
        dropping.close()
    assert outcomes == ["retrying"] * 3 + ["succeeded"]
    assert hostile.first_served["/ok"] - began < 2.5  # with 2 threads only: after the first 4 s timeouts
    runs = _runs(services)
    assert [runs[f"dropped-{n}"] for n in range(3)] == [("retrying", None, None, "timeout: could not connect within 4s")] * 3
    assert elapsed < 4 + 1.5, elapsed  # all three at once, each within its timeout; margin for a loaded machine


def test_an_attempt_whose_time_began_earlier_has_only_the_rest_of_it(hostile: HostileTarget) -> None:
    """Getting ready late (a slow name lookup, a busy executor) eats into the timeout, not past it."""
    began = time.monotonic()
    prepared = prepare(Connections(), {"url": hostile.url + "/drip"}, {}, timeout=4,
                       started_at=datetime.now(timezone.utc) - timedelta(seconds=3))
    prepared.fire()
    outcome = prepared.complete()
    assert outcome.error == "timeout: the response (HTTP 200) did not finish within 4s"
    assert time.monotonic() - began < 1 + 1.5  # 1 s was left of the 4 s; without the start it would be 4


def test_an_attempt_whose_time_ran_out_before_it_was_sent_sends_nothing(hostile: HostileTarget) -> None:
    prepared = prepare(Connections(), {"url": hostile.url + "/ok"}, {}, timeout=2,
                       started_at=datetime.now(timezone.utc) - timedelta(seconds=1.5))
    time.sleep(0.6)  # the executor was held up between getting ready and the instant
    prepared.fire()
    outcome = prepared.complete()
    assert outcome.error == "timeout: not sent, the attempt's 2s had run out before its request could be written"
    assert outcome.retryable
    deadline = time.monotonic() + 2
    while hostile.open_connections and time.monotonic() < deadline:  # the server notices the close
        time.sleep(0.01)
    assert hostile.open_connections == 0 and hostile.requests_served == 0


def test_an_answer_that_arrived_in_time_but_is_read_late_is_still_read(hostile: HostileTarget) -> None:
    prepared = prepare(Connections(), {"url": hostile.url + "/ok"}, {}, timeout=1)
    prepared.fire()
    time.sleep(1.5)  # the executor was busy: the answer waited in the socket past the deadline
    outcome = prepared.complete()
    assert (outcome.status_code, outcome.body, outcome.error) == (200, "ok", None)


def test_the_executor_counts_an_attempts_time_from_the_start_the_sweeper_counts_from(
    services: Services, hostile: HostileTarget,
) -> None:
    with services.db.connection() as conn:
        tenant = create_tenant(conn, "t")
    # One clock: the slot, the start Postgres records (its now() or the slot) and the sweeper's cut-off all
    # come from the wall clock.
    slot = datetime.now(timezone.utc).replace(microsecond=0)
    _job(services, hostile.url + "/ok", tenant, at=slot)
    (dispatch,) = _claim(services, slot)
    with services.db.connection() as conn:
        started = executions_store.start_unguarded(conn, dispatch.execution_id, 1)
        (page,) = maintenance_store.long_running(conn, slot + timedelta(days=1), 10, 1)
    assert started is not None and started.attempt_started_at is not None
    assert [(r.run.id, r.started_at) for r in page] == [(dispatch.execution_id, started.attempt_started_at)]


def test_a_run_readied_ahead_of_its_instant_by_more_than_its_timeout_still_has_all_of_it(
    services: Services, hostile: HostileTarget,
) -> None:
    """The executor counts from the recorded start (the instant), not from when it got ready."""
    with services.db.connection() as conn:
        tenant = create_tenant(conn, "t")
    slot = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(seconds=3)
    job_id = _job(services, hostile.url + "/ok", tenant, at=slot)
    with services.db.connection() as conn:
        conn.execute("UPDATE jobs SET request = request || '{\"timeout_seconds\": 1}' WHERE id = %s", (job_id,))
    (dispatch,) = _claim(services, slot - timedelta(milliseconds=services.settings.lookahead_ms))
    assert Executor(services, http_client()).run([dispatch]) == ["succeeded"]
    assert hostile.requests_served == 1


def test_the_sweeper_never_retries_an_attempt_still_connected(services: Services, hostile: HostileTarget) -> None:
    """At the instant the sweeper may end an attempt (its start, plus its timeout, plus the lost margin),
    the executor has already ended it: the dripping target is no longer connected, the result is the
    executor's own, and the sweeper leaves it alone."""
    services.settings = replace(services.settings, lost_margin_seconds=3)
    with services.db.connection() as conn:
        tenant = create_tenant(conn, "t")
    slot = datetime.now(timezone.utc).replace(microsecond=0)
    job_id = _job(services, hostile.url + "/drip", tenant, at=slot)
    with services.db.connection() as conn:
        conn.execute("UPDATE jobs SET request = request || '{\"timeout_seconds\": 2}' WHERE id = %s", (job_id,))
    (dispatch,) = _claim(services, slot)
    runner = threading.Thread(target=Executor(services, http_client()).run, args=([dispatch],))
    runner.start()
    started = _attempt_started_at(services, dispatch.execution_id)
    sweep_at = started + timedelta(seconds=2 + 3)
    time.sleep(max(0.0, sweep_at.timestamp() - time.time()))
    connected = hostile.open_connections
    report = run_maintenance(services, sweep_at)
    runner.join(15)
    assert connected == 0 and (report.retried, report.lost) == (0, 0)
    assert _runs(services)["drip"] == ("retrying", None, None,
                                       "timeout: the response (HTTP 200) did not finish within 2s")


def _attempt_started_at(services: Services, execution_id: str) -> datetime:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with services.db.connection() as conn:
            started = conn.execute("SELECT attempt_started_at FROM executions WHERE id = %s AND status <> 'queued'",
                                   (execution_id,)).fetchone()
        if started is not None:
            return started[0]
        time.sleep(0.02)
    raise AssertionError("the run never started")


# ---------------------------------------------------------------- a target that does not read


@pytest.mark.parametrize("make_sender", [BoundedSender, SharedSender], ids=["BoundedSender", "SharedSender"])
def test_a_target_that_does_not_read_its_request_holds_back_no_other_run_of_its_instant(
    services: Services, hostile: HostileTarget, make_sender: Callable[[], BoundedSender],
) -> None:
    """A request its target does not read (a body larger than its buffer and the socket's queue), first in
    its group; another tenant's runs of the same instant still go out at once. The target reads only once
    those have arrived (or after UNREAD_SECONDS, past every run's timeout): a writer waiting on it would
    hold them until the blocked run's 8 s are up, when their own 5 s have run out unsent.

    The runs are claimed ahead and the executor waits for their instant on the wall clock (the slot is
    taken from it), so that all of them are ready then and the group's writer writes them all."""
    slot = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(seconds=2)
    unread, sender = UnreadTarget(), make_sender()
    try:
        with services.db.connection() as conn:
            first, second = create_tenant(conn, "first"), create_tenant(conn, "second")
        blocked = _job(services, f"{unread.url}/unread", first, slot, body=BIG_BODY, timeout_seconds=8)
        for n in range(3):
            _job(services, f"{hostile.url}/ok-{n}", second, slot)
        claimed = _claim(services, slot - timedelta(milliseconds=services.settings.lookahead_ms))
        with services.db.connection() as conn:
            (blocked_run,) = conn.execute("SELECT id::text FROM executions WHERE job_id = %s", (blocked,)).fetchone()
        group = sorted(claimed, key=lambda dispatch: dispatch.execution_id != blocked_run)  # the blocked one first
        threading.Thread(target=lambda: wait_for(lambda: hostile.requests_served == 3, UNREAD_SECONDS)
                         and unread.reading.set(), daemon=True).start()
        outcomes = Executor(replace(services, sender=sender), http_client()).run(group)
    finally:
        sender.close()
        unread.close()
    assert outcomes == ["succeeded"] * 4
    runs = _runs(services)
    assert runs["unread"] == ("succeeded", 200, "ok", None) and unread.requests_read == 1
    assert [runs[f"ok-{n}"] for n in range(3)] == [("succeeded", 200, "ok", None)] * 3


# ---------------------------------------------------------------- secrets a target echoes


def test_a_target_echoing_the_requests_secrets_does_not_get_them_into_stored_history(
    services: Services, hostile: HostileTarget, slot: datetime,
) -> None:
    with services.db.connection() as conn:
        tenant = create_tenant(conn, "t")
    _job(services, f"{hostile.url}/echo?api_key={QUERY_SECRET}&page=2", tenant, slot,
         headers={"Authorization": f"Bearer {SECRET}", "X-Signature": "sig-abcdef", "X-Trace": "trace-me"})
    assert _pinned_executor(services, slot).run(_claim(services, slot)) == ["succeeded"]
    body = _runs(services)["echo"][2]
    assert body is not None and hostile.requests_served == 1
    for secret in (SECRET, QUERY_SECRET, "sig-abcdef"):
        assert secret not in body
    assert "Authorization: ***" in body and "api_key=***&page=2" in body and "X-Trace: trace-me" in body
