"""Success rules and the next-slot bound on retries, through the executor against a real target."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from tests.conftest import Target
from tests.integration.helpers import attempts, executions, executor_at, insert_job
from tests.support import FakeClock
from tickwork.dispatch.poller import Poller
from tickwork.timeutil import to_ms
from tickwork.wiring import Services

T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)


def _run(services: Services, target: Target, schedule: str = "0 0 1 1 *", **job: object) -> tuple[str, str]:
    """Create the job due at T0, claim it and run its first attempt; returns (job id, run status)."""
    job_id = insert_job(services, schedule=schedule, next_run_at=T0, url=target.url + "/hook", **job)
    Poller(services).tick(to_ms(T0))
    dispatch = services.invoker.dispatches[-1]  # type: ignore[union-attr]
    return job_id, executor_at(services, FakeClock(T0)).run([dispatch])[0]


def _set_success(services: Services, job_id: str, rules: str) -> None:
    with services.db.connection() as conn:
        conn.execute("UPDATE jobs SET success = %s WHERE id = %s", (rules, job_id))


def test_a_body_without_the_expected_text_is_a_retried_failure(services: Services, target: Target) -> None:
    target.response_body = b'{"state":"queued"}'
    job_id = insert_job(services, schedule="0 0 1 1 *", next_run_at=T0, url=target.url + "/hook")
    _set_success(services, job_id, '{"status_codes": ["2xx"], "body_contains": "\\"state\\":\\"done\\""}')
    Poller(services).tick(to_ms(T0))
    dispatch = services.invoker.dispatches[-1]  # type: ignore[union-attr]
    assert executor_at(services, FakeClock(T0)).run([dispatch]) == ["retrying"]
    (attempt,) = attempts(services, dispatch.execution_id)
    assert attempt[3] == 200 and attempt[4] == "HTTP 200: the response body does not contain success.body_contains"


def test_an_accepted_redirect_is_a_success(services: Services, target: Target) -> None:
    target.default_status = 302
    job_id = insert_job(services, schedule="0 0 1 1 *", next_run_at=T0, url=target.url + "/hook")
    _set_success(services, job_id, '{"status_codes": [302]}')
    Poller(services).tick(to_ms(T0))
    assert executor_at(services, FakeClock(T0)).run([services.invoker.dispatches[-1]]) == ["succeeded"]  # type: ignore[union-attr]


def test_without_rules_a_redirect_still_fails(services: Services, target: Target) -> None:
    target.default_status = 302
    _, status = _run(services, target, retry={"max_attempts": 1})
    assert status == "failed"


def test_a_retry_that_would_land_after_the_next_slot_ends_the_run(services: Services, target: Target) -> None:
    target.default_status = 500
    job_id, status = _run(services, target, schedule="* * * * *",
                          retry={"strategy": "fixed", "max_attempts": 3, "delay_seconds": 120, "past_next_run": False})
    assert status == "failed"
    (run,) = [row for row in executions(services, job_id) if row[1] == T0]
    (attempt,) = attempts(services, run[0])
    assert attempt[4] == ("HTTP 500; not retried: the next attempt would be after the job's next run at "
                          "2026-11-30T12:01:00.000Z (retry.past_next_run is false)")


def test_past_next_run_lets_the_retry_through(services: Services, target: Target) -> None:
    target.default_status = 500
    job_id, status = _run(services, target, schedule="* * * * *",
                          retry={"strategy": "fixed", "max_attempts": 3, "delay_seconds": 120, "past_next_run": True})
    assert status == "retrying"
    with services.db.connection() as conn:
        due = conn.execute("SELECT next_attempt_at FROM executions WHERE job_id = %s", (job_id,)).fetchone()[0]
    assert due == T0 + timedelta(seconds=120)  # a job stored without `jitter` keeps exact delays


def test_a_retry_before_the_next_slot_is_kept(services: Services, target: Target) -> None:
    target.default_status = 500
    _, status = _run(services, target, schedule="* * * * *",
                     retry={"strategy": "fixed", "max_attempts": 3, "delay_seconds": 30, "past_next_run": False})
    assert status == "retrying"
