"""The executor against real Postgres, Redis and a real HTTP target on loopback."""
from __future__ import annotations

import threading
from dataclasses import replace
import time
from datetime import datetime, timedelta, timezone

from tests.conftest import Target
from tests.integration.helpers import attempts, due_index, executions, insert_job
from tickwork.executor import Executor, http_client
from tickwork.models import Dispatch, executor_event
from tickwork.poller import Poller
from tickwork.timeutil import to_ms
from tickwork.wiring import Services, build_services
from tickwork_local.executors import ThreadPoolInvoker

T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)


def _queued_run(services: Services, target: Target, **job: object) -> tuple[str, Dispatch]:
    job_id = insert_job(services, schedule="0 0 1 1 *", next_run_at=T0, url=target.url + "/hook", **job)
    Poller(services).tick(to_ms(T0))
    dispatch = services.invoker.dispatches[-1]  # type: ignore[union-attr]
    return job_id, dispatch


def test_a_run_sends_the_request_and_records_the_attempt(services: Services, target: Target) -> None:
    job_id, dispatch = _queued_run(services, target, headers={"X-Custom": "yes"})
    assert Executor(services, http_client()).run([dispatch]) == ["succeeded"]
    (sent,) = target.requests
    assert (sent["method"], sent["path"], sent["body"]) == ("POST", "/hook", '{"hello":1}')
    assert sent["headers"]["X-Custom"] == "yes"
    assert sent["headers"]["Tickwork-Run-Id"] == dispatch.execution_id
    assert sent["headers"]["Tickwork-Attempt"] == "1"
    assert sent["headers"]["Tickwork-Scheduled-For"] == "2026-11-30T12:00:00.000Z"
    (row,) = executions(services, job_id)
    assert row[2:4] == ("succeeded", 1)
    (attempt,) = attempts(services, dispatch.execution_id)
    assert attempt[0] == 1 and attempt[3] == 200 and attempt[4] is None


def test_the_same_event_twice_sends_one_request(services: Services, target: Target) -> None:
    _, dispatch = _queued_run(services, target)
    executor = Executor(services, http_client())
    assert executor.run([dispatch]) == ["succeeded"]
    assert executor.run([dispatch]) == ["duplicate"]
    assert len(target.requests) == 1


def test_the_same_event_delivered_twice_concurrently_sends_one_request(services: Services, target: Target) -> None:
    _, dispatch = _queued_run(services, target)
    target.delay_seconds = 0.3
    outcomes: list[str] = []
    barrier = threading.Barrier(2)

    def deliver() -> None:
        barrier.wait()
        outcomes.extend(Executor(services, http_client()).run([dispatch]))

    threads = [threading.Thread(target=deliver) for _ in range(2)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert sorted(outcomes) == ["duplicate", "succeeded"]
    assert len(target.requests) == 1


def test_executor_waits_for_the_exact_instant(services: Services, target: Target) -> None:
    _, dispatch = _queued_run(services, target)
    fire_at_ms = int((time.time() + 0.4) * 1000)
    early = Dispatch(dispatch.execution_id, 1, fire_at_ms)
    Executor(services, http_client()).run([early])
    assert 0 <= target.requests[0]["at"] - fire_at_ms / 1000 < 0.1


def test_a_retryable_failure_queues_the_next_attempt_in_the_due_index(services: Services, target: Target) -> None:
    _, dispatch = _queued_run(services, target, retry={"strategy": "fixed", "max_attempts": 3, "delay_seconds": 30})
    target.statuses = [503]
    before = time.time()
    assert Executor(services, http_client()).run([dispatch]) == ["retrying"]
    score = due_index(services).score(f"e:{dispatch.execution_id}:2")
    assert score is not None and abs(score / 1000 - (before + 30)) < 2


def test_a_client_error_fails_without_retry(services: Services, target: Target) -> None:
    job_id, dispatch = _queued_run(services, target)
    target.statuses = [404]
    assert Executor(services, http_client()).run([dispatch]) == ["failed"]
    assert attempts(services, dispatch.execution_id)[0][3:] == (404, "HTTP 404")


def test_connection_errors_do_not_leak_the_url(services: Services) -> None:
    job_id = insert_job(services, schedule="0 0 1 1 *", next_run_at=T0,
                        url="http://127.0.0.1:9/hook?token=SUPERSECRET",
                        retry={"strategy": "fixed", "max_attempts": 1, "delay_seconds": 1})
    Poller(services).tick(to_ms(T0))
    dispatch = services.invoker.dispatches[-1]  # type: ignore[union-attr]
    assert Executor(services, http_client()).run([dispatch]) == ["failed"]
    (attempt,) = attempts(services, dispatch.execution_id)
    assert attempt[3] is None and attempt[4].startswith("connection failed")
    with services.db.connection() as conn:
        stored = conn.execute("SELECT last_error FROM executions WHERE job_id = %s", (job_id,)).fetchone()[0]
    assert "SUPERSECRET" not in attempt[4] and "SUPERSECRET" not in stored


def _run_until_finished(services: Services, job_id: str, timeout: float) -> None:
    """Drive the real loop: poller ticks every 100 ms, executors on a thread pool, as in `make dev`."""
    executor = Executor(services, http_client())
    pool = ThreadPoolInvoker(lambda event, _ctx: executor.run([Dispatch.from_dict(d) for d in event["dispatches"]]))
    services.invoker = pool
    deadline = time.time() + timeout
    try:
        while time.time() < deadline:
            Poller(services).tick(int(time.time() * 1000))
            rows = executions(services, job_id)
            if rows and rows[0][2] in ("succeeded", "failed"):
                return
            time.sleep(0.1)
    finally:
        pool.shutdown()
    raise AssertionError(f"execution did not finish: {executions(services, job_id)}")


def test_500_twice_then_200_takes_three_attempts_with_the_configured_delays(services: Services, target: Target) -> None:
    target.statuses = [500, 500, 200]
    job_id = insert_job(services, schedule="0 0 1 1 *", next_run_at=datetime.now(timezone.utc),
                        url=target.url + "/flaky", retry={"strategy": "linear", "max_attempts": 5, "delay_seconds": 1})
    _run_until_finished(services, job_id, timeout=10)
    (row,) = executions(services, job_id)
    assert row[2:4] == ("succeeded", 3)
    arrivals = [r["at"] for r in target.requests]
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    assert len(arrivals) == 3
    assert abs(gaps[0] - 1) <= 1 and abs(gaps[1] - 2) <= 1  # linear: 1 s then 2 s
    assert {r["headers"]["Tickwork-Run-Id"] for r in target.requests} == {row[0]}
    assert [a[3] for a in attempts(services, row[0])] == [500, 500, 200]


def test_max_attempts_two_ends_failed(services: Services, target: Target) -> None:
    target.statuses = [500, 500, 200]
    job_id = insert_job(services, schedule="0 0 1 1 *", next_run_at=datetime.now(timezone.utc),
                        url=target.url + "/flaky", retry={"strategy": "fixed", "max_attempts": 2, "delay_seconds": 1})
    _run_until_finished(services, job_id, timeout=8)
    (row,) = executions(services, job_id)
    assert row[2:4] == ("failed", 2)
    assert len(target.requests) == 2


def test_executor_event_groups_several_runs(services: Services, target: Target) -> None:
    for _ in range(3):
        insert_job(services, schedule="0 0 1 1 *", next_run_at=T0, url=target.url + "/hook")
    Poller(services).tick(to_ms(T0))
    event = executor_event(services.invoker.dispatches)  # type: ignore[union-attr]
    assert len(event["dispatches"]) == 3
    assert Executor(services, http_client()).run([Dispatch.from_dict(d) for d in event["dispatches"]]) == ["succeeded"] * 3
    assert len(target.requests) == 3


def test_a_deployed_executor_refuses_a_private_target_without_sending(services: Services, target: Target) -> None:
    """The API refuses private URLs too, but a name can start resolving to one later (DNS rebinding)."""
    deployed = build_services(replace(services.settings, allow_private_targets=False), invoker=services.invoker)
    try:
        _, dispatch = _queued_run(deployed, target, retry={"strategy": "fixed", "max_attempts": 3, "delay_seconds": 1})
        assert Executor(deployed, http_client()).run([dispatch]) == ["failed"]
        (attempt,) = attempts(deployed, dispatch.execution_id)
        assert attempt[4] == "refused: 127.0.0.1 resolves to a loopback address"
    finally:
        deployed.close()
    assert target.requests == []


def test_a_run_started_ahead_of_its_instant_records_the_instant(services: Services, target: Target) -> None:
    job_id = insert_job(services, schedule="0 0 1 1 *", next_run_at=datetime.now(timezone.utc) + timedelta(seconds=1),
                        url=target.url + "/hook")
    Poller(services).tick(int(time.time() * 1000))  # claims it up to the lookahead early
    (dispatch,) = services.invoker.dispatches  # type: ignore[union-attr]
    Executor(services, http_client()).run([dispatch])
    with services.db.connection() as conn:
        started, scheduled = conn.execute(
            "SELECT started_at, scheduled_for FROM executions WHERE job_id = %s", (job_id,)).fetchone()
    assert started >= scheduled
    assert target.requests[0]["at"] >= scheduled.timestamp()


def _queued_group(services: Services, target: Target, count: int, **job: object) -> list[Dispatch]:
    for i in range(count):
        insert_job(services, schedule="0 0 1 1 *", next_run_at=T0, url=f"{target.url}/run{i}", **job)
    Poller(services).tick(to_ms(T0))
    return list(services.invoker.dispatches)  # type: ignore[union-attr]


def test_a_group_due_at_one_instant_is_sent_together_at_that_instant(services: Services, target: Target) -> None:
    dispatches = _queued_group(services, target, 20)
    fire_at_ms = int((time.time() + 0.5) * 1000)
    group = [replace(d, fire_at_ms=fire_at_ms) for d in dispatches]
    outcomes = Executor(services, http_client()).run(group)
    assert outcomes == ["succeeded"] * 20, [a for d in group for a in attempts(services, d.execution_id) if a[3] != 200]
    arrivals = sorted(r["at"] - fire_at_ms / 1000 for r in target.requests)
    assert len(arrivals) == 20
    # Connections were opened during the wait; at the instant each run only writes its request.
    assert 0 <= arrivals[0] and arrivals[-1] < 0.05, arrivals


def test_a_slow_response_does_not_hold_back_the_other_results_of_its_group(
    services: Services, target: Target,
) -> None:
    dispatches = _queued_group(services, target, 3)
    target.path_delays = {"/run0": 1.5}
    done: list[str] = []
    runner = threading.Thread(target=lambda: done.extend(Executor(services, http_client()).run(dispatches)))
    runner.start()
    time.sleep(0.8)
    with services.db.connection() as conn:
        statuses = dict(conn.execute("SELECT e.status, count(*) FROM executions e GROUP BY 1").fetchall())
    runner.join(5)
    assert statuses == {"succeeded": 2, "running": 1}
    assert done == ["succeeded"] * 3


def test_a_group_runs_jobs_that_forbid_overlap_at_their_instant_beside_the_others(
    services: Services, target: Target,
) -> None:
    insert_job(services, schedule="0 0 1 1 *", next_run_at=T0, url=target.url + "/allow")
    skipping = insert_job(services, schedule="0 0 1 1 *", next_run_at=T0, url=target.url + "/skip")
    with services.db.connection() as conn:
        conn.execute("UPDATE jobs SET overlap = 'skip' WHERE id = %s", (skipping,))
    Poller(services).tick(to_ms(T0))
    group = list(services.invoker.dispatches)  # type: ignore[union-attr]
    assert Executor(services, http_client()).run(group) == ["succeeded", "succeeded"]
    assert Executor(services, http_client()).run(group) == ["duplicate", "duplicate"]
    assert sorted(r["path"] for r in target.requests) == ["/allow", "/skip"]


def test_an_event_naming_a_run_twice_sends_it_once(services: Services, target: Target) -> None:
    _, dispatch = _queued_run(services, target)
    other = _queued_group(services, target, 1)[-1]
    assert Executor(services, http_client()).run([dispatch, other, dispatch]) == ["succeeded", "succeeded", "duplicate"]
    assert len(target.requests) == 2
