"""The executor against real Postgres, Redis and a real HTTP target on loopback."""
from __future__ import annotations

import threading
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from tests.conftest import Target
from tests.integration.helpers import attempts, due_index, executions, executor_at, insert_job
from tests.support import FakeClock, score_of, wait_for
from tickwork.dispatch.poller import Poller
from tickwork.models import Dispatch, executor_event
from tickwork.runs.executor import MAX_EARLY_WAIT_SECONDS, Executor, http_client
from tickwork.timeutil import to_ms
from tickwork.wiring import Services, build_services

# Every executor here runs on a FakeClock from T0: the verdicts hold on any date and at any speed.
# The wall-clock tests are in test_executor_realtime.py.
T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)


def _executor(services: Services, at: datetime = T0) -> Executor:
    return executor_at(services, FakeClock(at))


def _queued_run(services: Services, target: Target, **job: object) -> tuple[str, Dispatch]:
    job_id = insert_job(services, schedule="0 0 1 1 *", next_run_at=T0, url=target.url + "/hook", **job)
    Poller(services).tick(to_ms(T0))
    dispatch = services.invoker.dispatches[-1]  # type: ignore[union-attr]
    return job_id, dispatch


def test_a_run_sends_the_request_and_records_the_attempt(services: Services, target: Target) -> None:
    job_id, dispatch = _queued_run(services, target, headers={"X-Custom": "yes"})
    assert _executor(services).run([dispatch]) == ["succeeded"]
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
    executor = _executor(services)
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
        outcomes.extend(_executor(services).run([dispatch]))

    threads = [threading.Thread(target=deliver) for _ in range(2)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert sorted(outcomes) == ["duplicate", "succeeded"]
    assert len(target.requests) == 1


def test_executor_waits_for_the_exact_instant(services: Services, target: Target) -> None:
    _, dispatch = _queued_run(services, target)
    clock = FakeClock(T0 - timedelta(milliseconds=400))  # the poller claims up to its lookahead early
    assert executor_at(services, clock).run([dispatch]) == ["succeeded"]
    assert clock.slept == [pytest.approx(0.4, abs=1e-6)]
    assert attempts(services, dispatch.execution_id)[0][1] == T0  # sent at its instant, not when started


def test_a_heavy_instant_claimed_seconds_ahead_is_still_sent_at_its_instant(services: Services, target: Target) -> None:
    """Break: the adaptive lookahead hands a heavy instant over up to 10 s early (the bench's 10,000 runs at
    one instant: 6.5 s). The executor used to wait only up to 5 s, so those runs were sent seconds early.
    Must hold: a lone run and a group alike wait for their instant and are sent at it."""
    _, alone = _queued_run(services, target)
    clock = FakeClock(T0 - timedelta(seconds=8))
    assert executor_at(services, clock).run([alone]) == ["succeeded"]
    assert clock.slept == [pytest.approx(8, abs=1e-6)]
    assert attempts(services, alone.execution_id)[0][1] == T0

    group = [_queued_run(services, target)[1] for _ in range(3)]
    clock = FakeClock(T0 - timedelta(seconds=9.5))
    assert executor_at(services, clock).run(group) == ["succeeded"] * 3
    assert [attempts(services, d.execution_id)[0][1] for d in group] == [T0] * 3


def test_a_run_dispatched_further_ahead_than_any_lookahead_waits_at_most_the_cap(
    services: Services, target: Target, caplog: pytest.LogCaptureFixture,
) -> None:
    _, dispatch = _queued_run(services, target)
    clock = FakeClock(T0 - timedelta(seconds=30))  # a clock problem: waits the cap, says so, then sends
    assert executor_at(services, clock).run([dispatch]) == ["succeeded"]
    assert clock.slept == [pytest.approx(MAX_EARLY_WAIT_SECONDS, abs=1e-6)]
    assert "clock problem" in caplog.text


def test_a_retryable_failure_queues_the_next_attempt_in_the_due_index(services: Services, target: Target) -> None:
    _, dispatch = _queued_run(services, target, retry={"strategy": "fixed", "max_attempts": 3, "delay_seconds": 30})
    target.statuses = [503]
    assert _executor(services).run([dispatch]) == ["retrying"]
    assert score_of(due_index(services), f"e:{dispatch.execution_id}:2") == to_ms(T0 + timedelta(seconds=30))


def test_a_client_error_fails_without_retry(services: Services, target: Target) -> None:
    job_id, dispatch = _queued_run(services, target)
    target.statuses = [404]
    assert _executor(services).run([dispatch]) == ["failed"]
    assert attempts(services, dispatch.execution_id)[0][3:] == (404, "HTTP 404")


def test_connection_errors_do_not_leak_the_url(services: Services) -> None:
    job_id = insert_job(services, schedule="0 0 1 1 *", next_run_at=T0,
                        url="http://127.0.0.1:9/hook?token=SUPERSECRET",
                        retry={"strategy": "fixed", "max_attempts": 1, "delay_seconds": 1})
    Poller(services).tick(to_ms(T0))
    dispatch = services.invoker.dispatches[-1]  # type: ignore[union-attr]
    assert _executor(services).run([dispatch]) == ["failed"]
    (attempt,) = attempts(services, dispatch.execution_id)
    assert attempt[3] is None and attempt[4].startswith("connection failed")
    with services.db.connection() as conn:
        stored = conn.execute("SELECT last_error FROM executions WHERE job_id = %s", (job_id,)).fetchone()[0]
    assert "SUPERSECRET" not in attempt[4] and "SUPERSECRET" not in stored


def _run_until_finished(services: Services, job_id: str, clock: FakeClock, ticks: int = 40) -> None:
    """Drive the loop on `clock`: a poller tick every 0.5 s, each dispatch run by an executor on the same
    clock (it sleeps to each run's instant)."""
    executor = executor_at(services, clock)
    invoker: Any = services.invoker
    for _ in range(ticks):
        invoker.dispatches.clear()
        Poller(services).tick(to_ms(clock.at))
        executor.run(list(invoker.dispatches))
        rows = executions(services, job_id)
        if rows and rows[0][2] in ("succeeded", "failed"):
            return
        clock.sleep(0.5)
    raise AssertionError(f"execution did not finish: {executions(services, job_id)}")


def test_500_twice_then_200_takes_three_attempts_with_the_configured_delays(services: Services, target: Target) -> None:
    target.statuses = [500, 500, 200]
    job_id = insert_job(services, schedule="0 0 1 1 *", next_run_at=T0,
                        url=target.url + "/flaky", retry={"strategy": "linear", "max_attempts": 5, "delay_seconds": 1})
    _run_until_finished(services, job_id, FakeClock(T0 - timedelta(seconds=1)))
    (row,) = executions(services, job_id)
    assert row[2:4] == ("succeeded", 3)
    # Linear: 1 s then 2 s after each attempt (sent and answered at once on this clock).
    assert [a[1] for a in attempts(services, row[0])] == [T0, T0 + timedelta(seconds=1), T0 + timedelta(seconds=3)]
    assert {r["headers"]["Tickwork-Run-Id"] for r in target.requests} == {row[0]}
    assert [r["headers"]["Tickwork-Attempt"] for r in target.requests] == ["1", "2", "3"]
    assert [a[3] for a in attempts(services, row[0])] == [500, 500, 200]


def test_max_attempts_two_ends_failed(services: Services, target: Target) -> None:
    target.statuses = [500, 500, 200]
    job_id = insert_job(services, schedule="0 0 1 1 *", next_run_at=T0,
                        url=target.url + "/flaky", retry={"strategy": "fixed", "max_attempts": 2, "delay_seconds": 1})
    _run_until_finished(services, job_id, FakeClock(T0 - timedelta(seconds=1)))
    (row,) = executions(services, job_id)
    assert row[2:4] == ("failed", 2)
    assert [a[1] for a in attempts(services, row[0])] == [T0, T0 + timedelta(seconds=1)]
    assert len(target.requests) == 2


def test_executor_event_groups_several_runs(services: Services, target: Target) -> None:
    for _ in range(3):
        insert_job(services, schedule="0 0 1 1 *", next_run_at=T0, url=target.url + "/hook")
    Poller(services).tick(to_ms(T0))
    event = executor_event(services.invoker.dispatches)  # type: ignore[union-attr]
    assert len(event["dispatches"]) == 3
    assert _executor(services).run([Dispatch.from_dict(d) for d in event["dispatches"]]) == ["succeeded"] * 3
    assert len(target.requests) == 3


def test_a_deployed_executor_refuses_a_private_target_without_sending(services: Services, target: Target) -> None:
    """The API refuses private URLs too, but a name can start resolving to one later (DNS rebinding)."""
    deployed = build_services(replace(services.settings, allow_private_targets=False), invoker=services.invoker)
    try:
        _, dispatch = _queued_run(deployed, target, retry={"strategy": "fixed", "max_attempts": 3, "delay_seconds": 1})
        assert _executor(deployed).run([dispatch]) == ["failed"]
        (attempt,) = attempts(deployed, dispatch.execution_id)
        assert attempt[4] == "refused: 127.0.0.1 resolves to a loopback address"
    finally:
        deployed.close()
    assert target.requests == []


def test_a_run_to_a_port_the_deployment_cannot_reach_fails_without_sending_or_retrying(
    services: Services, target: Target,
) -> None:
    """#22: a job saved before the target ports were narrowed would hang at the security group until its
    timeout, holding an execution: refused at once instead."""
    _, dispatch = _queued_run(services, target, retry={"strategy": "fixed", "max_attempts": 3, "delay_seconds": 1})
    narrowed = Services(replace(services.settings, target_ports=(80, 443)), services.db, services.redis,
                        services.invoker, keyring=services.keyring)
    assert _executor(narrowed).run([dispatch]) == ["failed"]
    (attempt,) = attempts(services, dispatch.execution_id)
    port = target.url.rsplit(":", 1)[1]
    assert attempt[4] == f"refused: url port {port} cannot be reached: this deployment sends to ports 80, 443 only"
    assert target.requests == []


def _queued_group(services: Services, target: Target, count: int, **job: object) -> list[Dispatch]:
    for i in range(count):
        insert_job(services, schedule="0 0 1 1 *", next_run_at=T0, url=f"{target.url}/run{i}", **job)
    Poller(services).tick(to_ms(T0))
    return list(services.invoker.dispatches)  # type: ignore[union-attr]


def test_a_group_gets_ready_while_it_waits_and_sends_every_run_at_its_instant(
    services: Services, target: Target,
) -> None:
    dispatches = _queued_group(services, target, 20)
    clock = FakeClock(T0 - timedelta(seconds=1))
    at_the_instant: list[tuple[bool, int]] = []

    def wait(seconds: float) -> None:  # the instant comes once every run could get ready, or 10 s went by
        at_the_instant.append((wait_for(lambda: target.connections == 20), len(target.requests)))
        clock.sleep(seconds)

    group = Executor(services, http_client(), clock=clock.time, sleep=wait)
    outcomes = group.run(dispatches)
    assert outcomes == ["succeeded"] * 20, [a for d in dispatches for a in attempts(services, d.execution_id)]
    # Connections were opened during the wait, nothing was sent before the instant, all was sent at it.
    assert at_the_instant == [(True, 0)]
    assert {a[1] for d in dispatches for a in attempts(services, d.execution_id)} == {T0}
    assert len(target.requests) == 20


def test_a_slow_response_does_not_hold_back_the_other_results_of_its_group(
    services: Services, target: Target,
) -> None:
    dispatches = _queued_group(services, target, 3)
    gate = target.gates["/run0"] = threading.Event()
    done: list[str] = []
    runner = threading.Thread(target=lambda: done.extend(_executor(services).run(dispatches)))
    runner.start()

    def statuses() -> dict[str, int]:
        with services.db.connection() as conn:
            return dict(conn.execute("SELECT e.status, count(*) FROM executions e GROUP BY 1").fetchall())

    recorded_while_held = wait_for(lambda: statuses() == {"succeeded": 2, "running": 1})
    gate.set()
    runner.join()
    assert recorded_while_held, statuses()
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
    assert _executor(services).run(group) == ["succeeded", "succeeded"]
    assert _executor(services).run(group) == ["duplicate", "duplicate"]
    assert sorted(r["path"] for r in target.requests) == ["/allow", "/skip"]


def test_an_event_naming_a_run_twice_sends_it_once(services: Services, target: Target) -> None:
    _, dispatch = _queued_run(services, target)
    other = _queued_group(services, target, 1)[-1]
    assert _executor(services).run([dispatch, other, dispatch]) == ["succeeded", "succeeded", "duplicate"]
    assert len(target.requests) == 2
