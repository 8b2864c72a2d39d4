"""Completion callbacks on the run path: real Postgres, Redis and HTTP targets, every clock a FakeClock."""
from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Thread
from typing import Any, Iterator

import pytest

from tests.conftest import Target
from tests.integration.helpers import executor_at, insert_job
from tests.support import FakeClock, score_of
from tickwork.dispatch.poller import Poller
from tickwork.errors import ConflictError, NotFoundError
from tickwork.models import Dispatch
from tickwork.ops.maintenance import run_maintenance
from tickwork.rules import completion
from tickwork.runs import awaiting
from tickwork.store import executions as executions_store
from tickwork.timeutil import to_ms
from tickwork.wiring import Services

T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)
PUBLIC = "https://api.example.com"


@pytest.fixture
def svc(services: Services) -> Services:
    services.settings = replace(services.settings, public_api_url=PUBLIC)
    return services


def _callback_job(svc: Services, url: str, timeout: int = 60, max_attempts: int = 2, overlap: str = "allow") -> str:
    job_id = insert_job(svc, schedule="0 0 1 1 *", next_run_at=T0, url=url,
                        retry={"strategy": "fixed", "max_attempts": max_attempts, "delay_seconds": 1})
    with svc.db.connection() as conn:
        conn.execute("UPDATE jobs SET completion = %s, overlap = %s WHERE id = %s",
                     (json.dumps({"mode": "callback", "timeout_seconds": timeout}), overlap, job_id))
    return job_id


def _first_run(svc: Services) -> Dispatch:
    Poller(svc).tick(to_ms(T0))
    return svc.invoker.dispatches[-1]  # type: ignore[union-attr]


def _row(svc: Services, execution_id: str) -> tuple[Any, ...]:
    with svc.db.connection() as conn:
        return conn.execute("SELECT status, attempt_count, completion_deadline, last_error, callback_token_hash"
                            " FROM executions WHERE id = %s", (execution_id,)).fetchone()


def _attempts(svc: Services, execution_id: str) -> list[tuple[Any, ...]]:
    with svc.db.connection() as conn:
        return conn.execute("SELECT number, status_code, error, output FROM attempts WHERE execution_id = %s"
                            " ORDER BY number", (execution_id,)).fetchall()


def _token(url: str) -> str:
    return url.rsplit("/", 1)[1]


def test_no_completion_in_time_fails_the_attempt_and_the_retry_gets_a_new_token(svc: Services, target: Target) -> None:
    target.default_status = 202
    _callback_job(svc, target.url + "/work")
    run = _first_run(svc)
    assert executor_at(svc, FakeClock(T0)).run([run]) == ["awaiting_completion"]
    first_url = target.requests[0]["headers"]["Tickwork-Callback-Url"]
    assert first_url.startswith(f"{PUBLIC}/callbacks/{run.execution_id}/1/")
    status, attempts, deadline, _, token_hash = _row(svc, run.execution_id)
    assert (status, attempts, deadline) == ("awaiting_completion", 1, T0 + timedelta(seconds=60))
    assert bytes(token_hash) == completion.token_hash(_token(first_url))  # its SHA-256, never the token
    assert score_of(svc.index, f"c:{run.execution_id}:1") == to_ms(T0) + 60_000

    # Checked early (a lookahead hands it over up to 10 s ahead), it waits for the deadline itself.
    early = FakeClock(T0 + timedelta(seconds=58))
    deadline_check = Dispatch(run.execution_id, 1, to_ms(T0) + 60_000, "completion")
    assert executor_at(svc, early).settle_waits([deadline_check]) == ["retrying"]
    assert early.slept == [pytest.approx(2)]
    assert _attempts(svc, run.execution_id) == [(1, 202, "no completion within 60 s", None)]
    assert score_of(svc.index, f"e:{run.execution_id}:2") is not None
    with pytest.raises(ConflictError):  # the right token, but its attempt is over
        awaiting.take_callback(svc, run.execution_id, "1", _token(first_url), "succeeded", None, T0)

    retry = Dispatch(run.execution_id, 2, to_ms(T0) + 61_000)
    assert executor_at(svc, FakeClock(T0 + timedelta(seconds=61))).run([retry]) == ["awaiting_completion"]
    second_url = target.requests[1]["headers"]["Tickwork-Callback-Url"]
    assert second_url.startswith(f"{PUBLIC}/callbacks/{run.execution_id}/2/") and second_url != first_url
    with pytest.raises(NotFoundError):  # the first attempt's token is not this attempt's
        awaiting.take_callback(svc, run.execution_id, "2", _token(first_url), "succeeded", None, T0)

    answer = awaiting.take_callback(svc, run.execution_id, "2", _token(second_url), "failed", "disk full", T0)
    assert answer.status == "failed"  # the job's last attempt
    assert _attempts(svc, run.execution_id)[1] == (2, 202, "failed: reported by its completion callback", "disk full")
    assert _row(svc, run.execution_id)[0:2] == ("failed", 2)
    # The deadline check still queued for attempt 2 finds nothing to do.
    late = Dispatch(run.execution_id, 2, to_ms(T0) + 121_000, "completion")
    assert executor_at(svc, FakeClock(T0 + timedelta(seconds=121))).settle_waits([late]) == ["unchanged"]


class _CallsBackFirst:
    """A target that reports its completion (in process) before it answers 202: the callback beats the
    recording of the answer."""

    def __init__(self, svc: Services) -> None:
        outer = self
        self.answers: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("content-length") or 0))
                url = self.headers["Tickwork-Callback-Url"]
                _, _, execution_id, attempt, token = url.rsplit("/", 4)
                outer.answers.append(awaiting.take_callback(
                    svc, execution_id, attempt, token, "succeeded", "done early", T0).status)
                self.send_response(202)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/work"
        Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def calls_back_first(svc: Services) -> Iterator[_CallsBackFirst]:
    server = _CallsBackFirst(svc)
    yield server
    server.server.shutdown()
    server.server.server_close()


def test_a_callback_that_beats_the_answer_is_applied_once_the_answer_is_recorded(
        svc: Services, calls_back_first: _CallsBackFirst) -> None:
    _callback_job(svc, calls_back_first.url)
    run = _first_run(svc)
    assert executor_at(svc, FakeClock(T0)).run([run]) == ["awaiting_completion"]
    assert calls_back_first.answers == ["running"]
    assert score_of(svc.index, f"c:{run.execution_id}:1") == to_ms(T0)  # settled at once, not at the deadline
    check = Dispatch(run.execution_id, 1, to_ms(T0), "completion")
    assert executor_at(svc, FakeClock(T0)).settle_waits([check]) == ["succeeded"]
    assert _attempts(svc, run.execution_id) == [(1, 202, None, "done early")]


def test_a_run_awaiting_its_completion_holds_its_jobs_overlap(svc: Services, target: Target) -> None:
    target.default_status = 202
    job_id = _callback_job(svc, target.url + "/work", overlap="skip")
    run = _first_run(svc)
    assert executor_at(svc, FakeClock(T0)).run([run]) == ["awaiting_completion"]
    with svc.db.connection() as conn:
        tenant = conn.execute("SELECT tenant_id::text FROM jobs WHERE id = %s", (job_id,)).fetchone()[0]
        second = executions_store.insert_manual(conn, tenant, job_id, T0 + timedelta(seconds=5))
        assert executions_store.start_guarded(conn, second, 1) == "skipped"


def test_a_job_paused_while_its_run_awaits_makes_no_retry(svc: Services, target: Target) -> None:
    target.default_status = 202
    job_id = _callback_job(svc, target.url + "/work")
    run = _first_run(svc)
    executor_at(svc, FakeClock(T0)).run([run])
    with svc.db.connection() as conn:
        conn.execute("UPDATE jobs SET status = 'paused' WHERE id = %s", (job_id,))
    check = Dispatch(run.execution_id, 1, to_ms(T0) + 60_000, "completion")
    assert executor_at(svc, FakeClock(T0 + timedelta(seconds=60))).settle_waits([check]) == ["failed"]
    assert _attempts(svc, run.execution_id)[0][2] == "no completion within 60 s; not retried: the job was paused"


def test_maintenance_settles_a_run_whose_deadline_check_redis_lost(svc: Services, target: Target) -> None:
    target.default_status = 202
    _callback_job(svc, target.url + "/work", max_attempts=1)
    run = _first_run(svc)
    executor_at(svc, FakeClock(T0)).run([run])
    svc.index.redis.zrem(svc.index.shards[0].due_key, f"c:{run.execution_id}:1")
    within_grace = T0 + timedelta(seconds=60 + svc.settings.sweep_after_seconds - 1)
    assert run_maintenance(svc, within_grace).completions_settled == 0  # the index's check may still come
    report = run_maintenance(svc, T0 + timedelta(seconds=60 + svc.settings.sweep_after_seconds + 1))
    assert report.completions_settled == 1
    assert _row(svc, run.execution_id)[0] == "failed"
