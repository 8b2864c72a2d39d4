"""A secret's allowed_hosts end to end on the local runtime, against a stock http.server: the allowed host
receives the expanded value; a job left pointing elsewhere after the secret was narrowed fails its attempt,
is not retried, and nothing it records or logs holds the value."""
from __future__ import annotations

import json
import logging
import time
from typing import Any, Iterator

import psycopg
import pytest

from tests.conftest import Target
from tests.integration.helpers import API_POLL_INTERVAL
from tests.local.test_local_runtime import WAIT_SECONDS, call, runtime  # noqa: F401 (the fixture, by name)
from tickwork.tenant.access import JOBS_READ
from tickwork_local.runtime import LocalRuntime

pytestmark = pytest.mark.slow

CANARY = "canary-7d3f0a5e-allowed-hosts"


@pytest.fixture
def stock() -> Iterator[Target]:
    server = Target(stock=True)
    yield server
    server.close()


def _job(runtime: LocalRuntime, url: str) -> dict[str, Any]:
    status, job = call(runtime, "POST", "/jobs", {
        "name": "hosts", "schedule": "0 0 0 1 1 *", "request": {
            "method": "POST", "url": url, "headers": {"Authorization": "Bearer ${secrets.TOKEN}"},
            "body": '{"t": "${secrets.TOKEN}"}'},
        "retry": {"strategy": "fixed", "max_attempts": 3, "delay_seconds": 1}})
    assert status == 201, job
    return job


def _run_to_the_end(runtime: LocalRuntime, job_id: str) -> dict[str, Any]:
    status, run = call(runtime, "POST", f"/jobs/{job_id}/run")
    assert status == 202, run
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        status, execution = call(runtime, "GET", f"/executions/{run['id']}")
        if execution.get("finished_at"):
            return execution
        time.sleep(API_POLL_INTERVAL)
    raise AssertionError(f"run {run['id']} did not finish: {execution}")


def test_an_allowed_host_gets_the_value_and_another_fails_unretried_without_leaking_it(
    runtime: LocalRuntime, stock: Target, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    port = stock.url.rsplit(":", 1)[1]
    bound = [f"http://127.0.0.1:{port}", f"http://localhost:{port}"]
    status, _ = call(runtime, "PUT", "/secrets/TOKEN", {"value": CANARY, "allowed_hosts": bound})
    assert status == 201
    allowed = _job(runtime, f"{stock.url}/allowed")
    elsewhere = _job(runtime, f"http://localhost:{port}/elsewhere")
    # The secret narrowed after the second job was saved: only the check before each attempt stops it.
    status, narrowed = call(runtime, "PUT", "/secrets/TOKEN", {"value": CANARY, "allowed_hosts": bound[:1]})
    assert (status, narrowed["allowed_hosts"]) == (200, bound[:1])

    sent = _run_to_the_end(runtime, allowed["id"])
    assert sent["status"] == "succeeded", sent
    received = [r for r in stock.requests if r["path"] == "/allowed"]
    assert len(received) == 1
    assert received[0]["headers"]["Authorization"] == f"Bearer {CANARY}" and CANARY in received[0]["body"]

    refused = _run_to_the_end(runtime, elsewhere["id"])
    assert refused["status"] == "failed" and len(refused["attempts"]) == 1, refused
    assert refused["attempts"][0]["error"] == f"refused: secret TOKEN is not allowed for http://localhost:{port}"
    assert not [r for r in stock.requests if r["path"] == "/elsewhere"]

    # The canary: in no answer of the API, no log record, no stored attempt.
    reader_status, reader = call(runtime, "POST", "/api-keys", {"name": "reader", "scopes": [JOBS_READ]})
    assert reader_status == 201
    answers = [call(runtime, "GET", path, key=reader["key"])[1] for path in (
        f"/executions/{sent['id']}", f"/executions/{refused['id']}", "/executions", "/secrets",
        f"/jobs/{allowed['id']}", f"/jobs/{elsewhere['id']}")]
    out = capsys.readouterr()
    assert CANARY not in json.dumps(answers) + caplog.text + out.out + out.err
    with psycopg.connect(runtime.settings.database_url) as conn:
        stored = conn.execute("SELECT string_agg(coalesce(error, '') || coalesce(response_body, ''), '') FROM attempts"
                              ).fetchone()
    assert stored is not None and stored[0] and CANARY not in stored[0]


def test_a_binding_written_as_a_bare_host_goes_over_https_on_443_only(runtime: LocalRuntime, stock: Target) -> None:
    """A secret bound to a host before schemes and ports were (its row as the release before wrote it): its job
    saved then, sending over http to another port, fails its attempt, unsent and unretried."""
    port = stock.url.rsplit(":", 1)[1]
    status, _ = call(runtime, "PUT", "/secrets/TOKEN", {"value": CANARY, "allowed_hosts": [f"http://127.0.0.1:{port}"]})
    assert status == 201
    job = _job(runtime, f"{stock.url}/plain")
    with psycopg.connect(runtime.settings.database_url, autocommit=True) as conn:
        conn.execute("UPDATE secrets SET allowed_hosts = ARRAY['127.0.0.1'], allowed_origins = NULL")
    assert call(runtime, "GET", "/secrets")[1]["items"][0]["allowed_hosts"] == ["127.0.0.1"]

    refused = _run_to_the_end(runtime, job["id"])
    assert refused["status"] == "failed" and len(refused["attempts"]) == 1, refused
    assert refused["attempts"][0]["error"] == f"refused: secret TOKEN is not allowed for http://127.0.0.1:{port}"
    assert not [r for r in stock.requests if r["path"] == "/plain"]
