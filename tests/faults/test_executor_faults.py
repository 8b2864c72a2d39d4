"""Faults inside an executor: it dies, or stalls, after sending the request and before storing the result."""
from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from tests.conftest import RecordingInvoker, Target
from tests.faults.support import HOURLY, Crash, crash, execute, next_hour, next_slot_fires, sent, slot_statuses
from tests.integration.helpers import attempts, due_index, insert_job
from tests.support import mark_built
from tickwork.dispatch.poller import Poller
from tickwork.http import delivery
from tickwork.ops.maintenance import run_maintenance
from tickwork.outcome import Outcome
from tickwork.store import attempts as attempts_store
from tickwork.timeutil import to_ms
from tickwork.wiring import Services

S0 = next_hour()
HOUR = timedelta(hours=1)
# Past the attempt's request timeout (5 s) plus the lost margin (60 s), counted from the real clock.
SWEEP_AT = S0 + timedelta(seconds=120)
LOST = "lost: executor did not report within 65 s"


def _first_run(services: Services, target: Target, max_attempts: int) -> str:
    job_id = insert_job(services, schedule=HOURLY, next_run_at=S0, url=target.url + "/hook",
                        retry={"strategy": "fixed", "max_attempts": max_attempts, "delay_seconds": 1})
    mark_built(due_index(services), to_ms(S0))
    assert Poller(services).tick(to_ms(S0)).dispatched == 1
    return job_id


def _crash_after_send(services: Services, invoker: RecordingInvoker, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the first dispatch in an executor that dies right after sending; returns the run id."""
    monkeypatch.setattr(attempts_store, "finish_attempts", crash)
    with pytest.raises(Crash):
        execute(services, invoker.dispatches, S0)
    monkeypatch.undo()
    return invoker.dispatches[0].execution_id


def test_crash_after_the_send_before_the_result_is_retried_with_the_same_run_id(
    services: Services, invoker: RecordingInvoker, target: Target, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Break: the executor dies after the target received the request, before the result is stored.
    Must hold: maintenance records the attempt as lost and queues the next one; the retry carries the
    same Tickwork-Run-Id, runs once, and the following slot fires."""
    job_id = _first_run(services, target, max_attempts=3)
    run_id = _crash_after_send(services, invoker, monkeypatch)
    assert slot_statuses(services, job_id) == {S0: "running"} and sent(target) == [(run_id, "1")]

    report = run_maintenance(services, SWEEP_AT)
    assert (report.retried, report.lost) == (1, 0)
    assert Poller(services).tick(to_ms(SWEEP_AT) + 1_000).dispatched == 1
    assert execute(services, invoker.dispatches[1:], SWEEP_AT + timedelta(seconds=1)) == ["succeeded"]
    assert sent(target) == [(run_id, "1"), (run_id, "2")]
    assert [(a[0], a[3], a[4]) for a in attempts(services, run_id)] == [(1, None, LOST), (2, 200, None)]
    next_slot_fires(services, invoker, target, job_id, S0 + HOUR, {S0: "succeeded"})


def test_crash_after_the_send_with_no_attempt_left_ends_lost(
    services: Services, invoker: RecordingInvoker, target: Target, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Break: the same crash on the run's last allowed attempt.
    Must hold: the run ends `lost` with the attempt saying why, nothing is retried, the next slot fires."""
    job_id = _first_run(services, target, max_attempts=1)
    run_id = _crash_after_send(services, invoker, monkeypatch)
    assert run_maintenance(services, SWEEP_AT).lost == 1
    assert Poller(services).tick(to_ms(SWEEP_AT) + 1_000).dispatched == 0
    assert [(a[0], a[4]) for a in attempts(services, run_id)] == [(1, LOST)]
    next_slot_fires(services, invoker, target, job_id, S0 + HOUR, {S0: "lost"})


def test_an_executor_reporting_after_it_was_declared_lost_changes_nothing(
    services: Services, invoker: RecordingInvoker, target: Target, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Break: the executor stalls after sending (a frozen Lambda) until maintenance has declared the
    attempt lost and the retry has succeeded; then it tries to store its own result.
    Must hold: its late result is refused, the run keeps the retry's outcome and attempts."""
    job_id = _first_run(services, target, max_attempts=3)
    sent_first, resume = threading.Event(), threading.Event()
    real_complete = delivery.Prepared.complete

    def send_then_stall(prepared: delivery.Prepared) -> Outcome:
        outcome = real_complete(prepared)
        if not sent_first.is_set():
            sent_first.set()
            assert resume.wait(10)
        return outcome

    monkeypatch.setattr(delivery.Prepared, "complete", send_then_stall)
    late: list[str] = []
    first = threading.Thread(target=lambda: late.extend(execute(services, invoker.dispatches[:1], S0)))
    first.start()
    assert sent_first.wait(5)

    assert run_maintenance(services, SWEEP_AT).retried == 1
    Poller(services).tick(to_ms(SWEEP_AT) + 1_000)
    assert execute(services, invoker.dispatches[1:], SWEEP_AT + timedelta(seconds=1)) == ["succeeded"]
    resume.set()
    first.join(5)
    assert late == ["superseded"]
    run_id = invoker.dispatches[0].execution_id
    assert slot_statuses(services, job_id) == {S0: "succeeded"}
    assert [(a[0], a[4]) for a in attempts(services, run_id)] == [(1, LOST), (2, None)]
    assert sent(target) == [(run_id, "1"), (run_id, "2")]
    next_slot_fires(services, invoker, target, job_id, S0 + HOUR, {S0: "succeeded"})
