"""Tickwork delivering real scheduled runs to stock server software started on this machine (issue 20).

Targets written for the suite (bench/target.py, tests.conftest.Target) answer as their authors expected,
so they cannot show how delivery fares against servers that close after each answer, idle out connections
opened ahead, frame bodies as chunks or by closing, or reset the socket. Software nobody here wrote can:
Python's `http.server` (HTTP/1.0, and HTTP/1.1 with a 1 s handler timeout), uvicorn (1 s keep-alive),
gunicorn's sync worker, aiohttp, Node's `http` (its default, and a 300 ms keepAliveTimeout), Debian's
nginx (2 s keep-alive, 3 requests a connection; HTTPS by a local CA), and a server that resets the
connection right behind a complete answer.

Every case is a job on a 1-3 s schedule; all run at once in one local runtime (a module fixture) for at
least RUNS_PER_CASE runs, then the jobs are paused and their runs left to finish (a run handed over before the
pause whose instant comes after it is not sent: it ends skipped). What must hold for each:
every run's request reaches the server exactly once (Tickwork-Attempt 1: a misjudged answer shows up as a
retry that arrives again), and every run ends with the status its answer earned, the attempt recording
the status code and (as much as is kept of) the body the server sent. The servers run on the wall
clock, so these tests are marked slow.
"""
from __future__ import annotations

import contextlib
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Protocol, Sequence
from urllib.parse import urlsplit

import psycopg
import pytest

from tests.conftest import _with_search_path
from tests.integration.helpers import API_POLL_INTERVAL
from tests.interop import servers as stock
from tests.interop.runs import Attempt, Run, arrival_counts, count_runs, load_runs
from tests.interop.shapes import BIG_BODY, Arrival
from tests.interop.targets import HttpServerTarget, ResetTarget
from tests.interop.tls import Authority
from tests.local.test_local_runtime import call
from tests.support import wait_for
from tickwork.http.delivery import MAX_STORED_BODY_BYTES
from tickwork.settings import Settings
from tickwork.store.migrate import migrate
from tickwork.timeutil import from_ms, rfc3339
from tickwork_local.runtime import LocalRuntime

pytestmark = [pytest.mark.slow, pytest.mark.realtime]

# Runs every job must have had before the jobs are paused (3 s schedules: about 12 s).
RUNS_PER_CASE = 4
# Every case's job starts at one whole second this far past the fixture's start, after all are created: a job
# created after the tick that claimed its first slot's second would be sent by the next tick (up to a tick
# late, more on a loaded machine), which the lag check below would take for a late send.
START_AFTER_SECONDS = 5
WINDOW_TIMEOUT_SECONDS = 45.0 + START_AFTER_SECONDS
# From the pause until every run has finished: a retried run takes up to 3 attempts of 5 s plus 1 s pauses.
SETTLE_TIMEOUT_SECONDS = 30.0
# A run is sent within milliseconds of its slot (docs/benchmarks.md); later than this is a defect.
LATE_SECONDS = 1.0
REQUEST_TIMEOUT_SECONDS = 5
# Retries that always happen, and soon: a wrongly failed attempt shows up as a second arrival of the run.
RETRY = {"strategy": "fixed", "max_attempts": 3, "delay_seconds": 1, "jitter": "none", "past_next_run": True}
EVERY_SECOND, EVERY_2S, EVERY_3S = "* * * * * *", "*/2 * * * * *", "*/3 * * * * *"


@dataclass(frozen=True)
class Answer:
    """What every run of a case must end with: its status, its attempts' status code, the body stored and
    a phrase its error must contain (None: no error)."""

    status: str = "succeeded"
    status_code: int | None = 200
    body: str | None = "ok"
    error_mentions: str | None = None
    attempts: int = 1
    arrives: bool = True


OK = Answer()
NO_CONTENT = Answer(status_code=204, body="")
# A 3xx is not followed (a redirect could point inside the network) and not retried: only 5xx, 408 and 429
# are (tickwork.http.delivery._outcome, tickwork.rules.retry.is_retryable_status).
NOT_MODIFIED = Answer(status="failed", status_code=304, body="", error_mentions="redirect not followed")
# Of a longer body only the first MAX_STORED_BODY_BYTES are kept (tickwork.http.delivery.stored_body).
CUT = Answer(body=BIG_BODY[:MAX_STORED_BODY_BYTES].decode())
# Refused before any request is written, and not retried: another attempt would meet the same certificate.
UNTRUSTED = Answer(status="failed", status_code=None, body=None, error_mentions="certificate", arrives=False)


@dataclass(frozen=True)
class Case:
    id: str
    server: str
    shape: str  # the path's last segment, which says how the server answers (tests.interop.shapes)
    breaks: str  # what this answer does that a delivery bug trips on
    answer: Answer = OK
    schedule: str = EVERY_2S
    method: str = "POST"


CASES = [
    Case("py10-length", "py10", "length", "HTTP/1.0: the server closes right after the answer, whose body leaves in "
         "a second write after the headers"),
    Case("py10-close", "py10", "close", "no length: the body ends when the server closes"),
    Case("py10-204", "py10", "204", "no body, then the close", NO_CONTENT),
    Case("py10-304", "py10", "304", "a 3xx without a body, then the close", NOT_MODIFIED),
    Case("py10-big", "py10", "big", "105 KB, closed by the server while Tickwork stops reading at 4 KB", CUT),
    Case("py10-slow", "py10", "slow", "1.5 s before the status line, then the close", schedule=EVERY_3S),
    Case("py11-length", "py11", "length", "HTTP/1.1 with a 1 s handler timeout: a connection opened ~1.5 s "
         "ahead of the instant is closed by the server before the request is written"),
    Case("py11-chunked", "py11", "chunked", "chunked, on a server that idles connections out after 1 s"),
    Case("py11-close", "py11", "close", "no length on HTTP/1.1: the body ends when the server closes"),
    Case("py11-204", "py11", "204", "no body, on a server that idles connections out after 1 s", NO_CONTENT),
    Case("uvicorn-length", "uvicorn", "length", "a keep-alive connection reused 1 s later, just as uvicorn's 1 s "
         "keep-alive closes it", schedule=EVERY_SECOND),
    Case("uvicorn-chunked", "uvicorn", "chunked", "chunked, from an ASGI app streaming its body"),
    Case("uvicorn-304", "uvicorn", "304", "a 3xx with Content-Length: 0 on a kept connection", NOT_MODIFIED),
    Case("uvicorn-slow", "uvicorn", "slow", "1.5 s before the status line on a connection with a 1 s keep-alive",
         schedule=EVERY_3S),
    Case("gunicorn-length", "gunicorn", "length", "`Connection: close` after each answer (the sync worker)"),
    Case("gunicorn-nolength", "gunicorn", "nolength", "chunked and `Connection: close` at once"),
    Case("gunicorn-big", "gunicorn", "big", "105 KB with `Connection: close`; Tickwork stops reading at 4 KB", CUT),
    Case("aiohttp-length", "aiohttp", "length", "a long keep-alive (75 s): the connection is reused"),
    Case("aiohttp-chunked", "aiohttp", "chunked", "chunked, from a StreamResponse"),
    Case("aiohttp-204", "aiohttp", "204", "no body on a kept connection", NO_CONTENT),
    Case("aiohttp-big", "aiohttp", "big", "105 KB on a kept connection; Tickwork stops reading at 4 KB", CUT),
    Case("node-length", "node", "length", "Node's default 5 s keep-alive"),
    Case("node-chunked", "node", "chunked", "chunked, the body's parts 10 ms apart"),
    Case("node-close", "node", "close", "`Connection: close` set by the handler"),
    Case("node-slow", "node", "slow", "1.5 s before the status line", schedule=EVERY_3S),
    Case("node300-length", "node300", "length", "a 300 ms keepAliveTimeout: every kept connection is gone by the "
         "next run", schedule=EVERY_SECOND),
    Case("node300-chunked", "node300", "chunked", "chunked, on a server closing idle connections after 300 ms"),
    Case("nginx-length", "nginx", "length", "`return 200`; every third request on a connection is answered with "
         "`Connection: close` (keepalive_requests 3)", schedule=EVERY_SECOND),
    Case("nginx-204", "nginx", "204", "no body; idle connections closed after 2 s, the job's interval", NO_CONTENT),
    Case("nginx-304", "nginx", "304", "a 3xx with Content-Length: 0", NOT_MODIFIED),
    Case("nginx-close", "nginx", "close", "`Connection: close` (keepalive_timeout 0 for this location)"),
    Case("nginx-big", "nginx", "big", "a 105 KB static file; Tickwork stops reading at 4 KB", CUT, method="GET"),
    Case("nginx-chunked", "nginx", "chunked", "proxied: an upstream body ended by close, re-framed as chunks"),
    Case("nginx-slow", "nginx", "slow", "proxied: 1.5 s before the upstream answers", schedule=EVERY_3S),
    Case("reset-length", "reset", "length", "a complete answer (Content-Length), then RST instead of FIN"),
    Case("reset-close", "reset", "close", "a complete answer with `Connection: close`, then RST"),
]
TLS_TRUSTED = Case("tls-trusted", "nginx-trusted", "tls", "HTTPS by a private CA named in target_ca_bundle")
TLS_UNKNOWN = Case("tls-unknown", "nginx-unknown", "tls", "HTTPS by a CA the deployment does not trust", UNTRUSTED)
ALL_CASES = [*CASES, TLS_TRUSTED, TLS_UNKNOWN]


class Target(Protocol):
    url: str

    def arrivals(self) -> list[Arrival]: ...


@dataclass(frozen=True)
class Delivered:
    """Per case id: its job's runs (slot order) and the requests its server read."""

    runs: dict[str, list[Run]]
    arrivals: dict[str, list[Arrival]]


@pytest.fixture(scope="module")
def delivered(servers: Any, key_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Delivered]:
    """Every server and one runtime; every case's job created at once and run until each has had
    RUNS_PER_CASE runs, then paused; once every run has finished, what was recorded on both sides."""
    nginx, node = stock.require_servers()
    directory = tmp_path_factory.mktemp("interop")
    trusted = Authority.create("Interop CA", directory)
    with contextlib.ExitStack() as stack:
        targets = stack.enter_context(started_targets(directory, nginx, node, trusted))
        settings = stack.enter_context(isolated_settings(servers, key_file, target_ca_bundle=str(trusted.cert_file)))
        runtime = LocalRuntime(settings, port=0)
        runtime.start()
        stack.callback(runtime.stop)
        urls = {case.id: f"{targets.urls[case.server]}/{case.shape}" for case in ALL_CASES}
        start_at = rfc3339(from_ms((int(time.time()) + START_AFTER_SECONDS) * 1000))
        jobs = {case.id: create_job(runtime, case, urls[case.id], start_at) for case in ALL_CASES}
        job_ids = list(jobs.values())
        wait_for(lambda: count_runs(settings.database_url, job_ids)[0] >= RUNS_PER_CASE,
                 timeout=WINDOW_TIMEOUT_SECONDS, interval=API_POLL_INTERVAL)
        for job_id in job_ids:
            status, body = call(runtime, "POST", f"/jobs/{job_id}/pause")
            assert status == 200, body
        wait_for(lambda: count_runs(settings.database_url, job_ids)[1] == 0,
                 timeout=SETTLE_TIMEOUT_SECONDS, interval=API_POLL_INTERVAL)
        runtime.stop()
        runs = load_runs(settings.database_url, job_ids)
        arrivals = targets.arrivals()
        yield Delivered({case_id: runs[job_id] for case_id, job_id in jobs.items()},
                        {case_id: [a for a in arrivals if (a.port, a.path) == _port_and_path(url)]
                         for case_id, url in urls.items()})


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_every_run_arrives_once_and_ends_as_its_answer_earned(delivered: Delivered, case: Case) -> None:
    """A complete answer is the run's outcome whatever the connection does after it (a close, a reset,
    `Connection: close`, HTTP/1.0), and a connection the server closed before the request was written
    (opened ahead, or kept alive) is Tickwork's to replace, not a failed attempt: each run is sent once
    and recorded with the status, code and body its server answered."""
    assert_delivered(case, delivered)


def test_https_by_a_ca_the_deployment_trusts_is_delivered(delivered: Delivered) -> None:
    """A target whose certificate comes from a private CA is delivered to when the deployment names that
    CA in TICKWORK_TARGET_CA_BUNDLE (Settings.target_ca_bundle): every run succeeds, sent once."""
    assert_delivered(TLS_TRUSTED, delivered)


def test_https_by_an_unknown_ca_is_refused_once_with_a_certificate_error(delivered: Delivered) -> None:
    """A target whose certificate no trusted CA signed (the bundle names another) is refused: each run
    fails after one attempt (a retry meets the same certificate), its error names the certificate
    problem, and no request ever reaches the server."""
    assert_delivered(TLS_UNKNOWN, delivered)


def assert_delivered(case: Case, delivered: Delivered) -> None:
    problems = case_problems(case, delivered.runs[case.id], delivered.arrivals[case.id])
    assert not problems, f"{case.id} ({case.breaks}):\n  " + "\n  ".join(problems)


def case_problems(case: Case, runs: Sequence[Run], arrivals: Sequence[Arrival]) -> list[str]:
    found = []
    if len(runs) < RUNS_PER_CASE:
        found.append(f"{len(runs)} runs, expected at least {RUNS_PER_CASE}")
    strays = set(arrival_counts(arrivals)) - {run.id for run in runs}
    if strays:
        found.append(f"requests carrying no run id of this job: {sorted(strays)}")
    for run in runs:
        arrived = [a.attempt for a in arrivals if a.run_id == run.id]
        if run.stopped_by_pause:  # handed over before the pause, its instant after it: never sent
            if arrived:
                found.append(f"{run.describe(arrivals)}: skipped by the pause, yet it arrived")
            continue
        wrong = run_problems(case.answer, run, arrived)
        if wrong:
            found.append(f"{run.describe(arrivals)}: {'; '.join(wrong)}")
    return found


def run_problems(answer: Answer, run: Run, arrived: list[str]) -> list[str]:
    """What is wrong with one run; `arrived` holds the Tickwork-Attempt of each of its requests the server read."""
    wrong = []
    if not run.finished:
        wrong.append("never finished")
    elif run.status != answer.status:
        wrong.append(f"expected {answer.status}")
    if run.attempt_count != answer.attempts:
        wrong.append(f"expected {answer.attempts} attempt(s)")
    expected_arrivals = ["1"] if answer.arrives else []
    if arrived != expected_arrivals:
        wrong.append("expected to arrive once" if answer.arrives else "expected never to arrive")
    for attempt in run.attempts:
        if not answered_as_expected(answer, attempt):
            wrong.append(f"attempt {attempt.number} recorded otherwise than {expected_record(answer)}")
    lag = run.lag_seconds
    if lag is not None and not lag < LATE_SECONDS:
        wrong.append(f"first attempt sent {lag:.3f} s after its slot")
    return wrong


def answered_as_expected(answer: Answer, attempt: Attempt) -> bool:
    mentions = answer.error_mentions
    error_ok = attempt.error is None if mentions is None else mentions in (attempt.error or "").lower()
    return attempt.status_code == answer.status_code and (attempt.body or "") == (answer.body or "") and error_ok


def expected_record(answer: Answer) -> str:
    code = "no status code" if answer.status_code is None else f"HTTP {answer.status_code}"
    body = f"a body of {len(answer.body)} characters" if answer.body and len(answer.body) > 40 else repr(answer.body or "")
    error = "no error" if answer.error_mentions is None else f"an error mentioning {answer.error_mentions!r}"
    return f"{code}, body {body}, {error}"


@dataclass(frozen=True)
class Targets:
    """The started servers, and the base URL of each name cases use (nginx's HTTPS sites are names too)."""

    servers: list[Target]
    urls: dict[str, str]

    def arrivals(self) -> list[Arrival]:
        return [arrival for server in self.servers for arrival in server.arrivals()]


@contextlib.contextmanager
def started_targets(directory: Path, nginx: str, node: str, trusted: Authority) -> Iterator[Targets]:
    """Every server of the suite; the processes start together, then are waited on."""
    unknown = Authority.create("Unknown CA", directory)
    with contextlib.ExitStack() as stack:
        py10 = _closing(stack, HttpServerTarget())
        in_process: dict[str, Target] = {
            "py10": py10,
            "py11": _closing(stack, HttpServerTarget("HTTP/1.1", timeout=1)),
            "reset": _closing(stack, ResetTarget()),
        }
        sites = stock.NginxSites(py10.url, trusted.issue(directory), unknown.issue(directory))
        starts = {
            "uvicorn": stock.uvicorn,
            "gunicorn": stock.gunicorn,
            "aiohttp": stock.aiohttp,
            "node": lambda d: stock.node(node, d),
            "node300": lambda d: stock.node(node, d, keep_alive_ms=stock.NODE_SHORT_KEEP_ALIVE_MS),
            "nginx": lambda d: stock.Nginx(nginx, d, sites),
        }
        processes: dict[str, stock.ProcessTarget] = {}
        for name, start in starts.items():
            (directory / name).mkdir()
            processes[name] = _closing(stack, start(directory / name))
        deadline = time.monotonic() + stock.START_TIMEOUT_SECONDS
        for process in processes.values():
            process.ready(deadline)
        https = processes["nginx"]
        assert isinstance(https, stock.Nginx)
        urls = {name: target.url for name, target in {**in_process, **processes}.items()}
        yield Targets([*in_process.values(), *processes.values()],
                      urls | {"nginx-trusted": https.trusted_url, "nginx-unknown": https.unknown_url})


def _closing(stack: contextlib.ExitStack, target: Any) -> Any:
    stack.callback(target.close)
    return target


@contextlib.contextmanager
def isolated_settings(servers: Any, key_file: Path, **fields: Any) -> Iterator[Settings]:
    """tests/conftest.py's `settings`, for a whole module: its own schema and key namespace, private
    targets allowed; the API's rate limit off, since one key creates and pauses every job at once."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(servers.database_url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    database_url = _with_search_path(servers.database_url, schema)
    namespace = f"tickwork-test-{uuid.uuid4().hex[:12]}"
    try:
        with psycopg.connect(database_url, autocommit=True) as conn:
            migrate(conn)
        yield Settings(database_url=database_url, redis_url=servers.redis_url, namespace=namespace,
                       allow_private_targets=True, key_file=str(key_file), rate_limit_per_second=0, **fields)
    finally:
        _drop(servers, schema, namespace)


def _drop(servers: Any, schema: str, namespace: str) -> None:
    import redis

    with psycopg.connect(servers.database_url, autocommit=True) as admin:
        admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    client = redis.Redis.from_url(servers.redis_url)
    keys = list(client.scan_iter(match="{" + namespace + "[}/]*"))
    if keys:
        client.delete(*keys)
    client.close()


def create_job(runtime: LocalRuntime, case: Case, url: str, start_at: str) -> str:
    request: dict[str, Any] = {"method": case.method, "url": url, "timeout_seconds": REQUEST_TIMEOUT_SECONDS}
    if case.method == "POST":
        request |= {"headers": {"Content-Type": "application/json"}, "body": f'{{"case": "{case.id}"}}'}
    status, job = call(runtime, "POST", "/jobs", {"name": f"interop {case.id}", "schedule": case.schedule,
                                                  "start_at": start_at, "request": request, "retry": RETRY})
    assert status == 201, job
    return job["id"]


def _port_and_path(url: str) -> tuple[int, str]:
    parts = urlsplit(url)
    return parts.port or 0, parts.path
