"""Overlap policies, decided by the executor at each run's instant, against real Postgres and HTTP."""
from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone

from tests.conftest import Target
from tests.integration.helpers import due_index, executions, insert_job
from tickwork.executor import Executor, http_client
from tickwork.models import Dispatch
from tickwork.poller import Poller
from tickwork.timeutil import to_ms
from tickwork.wiring import Services

T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)


def _three_runs(services: Services, target: Target, overlap: str) -> tuple[str, list[Dispatch]]:
    job_id = insert_job(services, schedule="* * * * * *", next_run_at=T0, url=target.url + "/slow")
    with services.db.connection() as conn:
        conn.execute("UPDATE jobs SET overlap = %s WHERE id = %s", (overlap, job_id))
    for second in range(3):
        Poller(services).tick(to_ms(T0 + timedelta(seconds=second)) - services.settings.lookahead_ms)
    dispatches = list(services.invoker.dispatches)  # type: ignore[union-attr]
    assert len(dispatches) == 3
    return job_id, dispatches


def _start_slow_first_run(services: Services, target: Target, first: Dispatch) -> threading.Thread:
    target.delay_seconds = 1.0
    thread = threading.Thread(target=Executor(services, http_client()).run, args=([first],))
    thread.start()
    deadline = time.time() + 5
    while not target.requests and time.time() < deadline:
        time.sleep(0.01)
    return thread


def test_skip_records_a_skipped_run_while_the_previous_one_is_in_progress(services: Services, target: Target) -> None:
    job_id, (first, second, _) = _three_runs(services, target, "skip")
    thread = _start_slow_first_run(services, target, first)
    assert Executor(services, http_client()).run([second]) == ["skipped"]
    thread.join()
    statuses = {r[0]: r[2] for r in executions(services, job_id)}
    assert statuses[first.execution_id] == "succeeded" and statuses[second.execution_id] == "skipped"
    assert len(target.requests) == 1
    with services.db.connection() as conn:
        note = conn.execute("SELECT last_error FROM executions WHERE id = %s", (second.execution_id,)).fetchone()[0]
    assert "still in progress" in note


def test_queue_one_runs_one_queued_run_after_the_current_one_and_skips_the_rest(
    services: Services, target: Target
) -> None:
    job_id, (first, second, third) = _three_runs(services, target, "queue_one")
    thread = _start_slow_first_run(services, target, first)
    executor = Executor(services, http_client())
    assert executor.run([second]) == ["waiting"]
    assert executor.run([third]) == ["skipped"]
    thread.join()
    # The first run's end released the waiting one into the due index; the next tick dispatches it.
    assert due_index(services).score(f"e:{second.execution_id}:1") is not None
    services.invoker.dispatches.clear()  # type: ignore[union-attr]
    Poller(services).tick(int(time.time() * 1000))
    (released,) = services.invoker.dispatches  # type: ignore[union-attr]
    target.delay_seconds = 0
    assert executor.run([released]) == ["succeeded"]
    statuses = [r[2] for r in executions(services, job_id)][:3]
    assert statuses == ["succeeded", "succeeded", "skipped"]
    assert len(target.requests) == 2


def test_allow_runs_overlapping_runs_side_by_side(services: Services, target: Target) -> None:
    job_id, (first, second, _) = _three_runs(services, target, "allow")
    thread = _start_slow_first_run(services, target, first)
    assert Executor(services, http_client()).run([second]) == ["succeeded"]
    thread.join()
    assert len(target.requests) == 2


def test_two_runs_starting_at_once_under_skip_do_not_both_run(services: Services, target: Target) -> None:
    job_id, (first, second, _) = _three_runs(services, target, "skip")
    target.delay_seconds = 0.5
    outcomes: list[str] = []
    barrier = threading.Barrier(2)

    def run(dispatch: Dispatch) -> None:
        barrier.wait()
        outcomes.extend(Executor(services, http_client()).run([dispatch]))

    threads = [threading.Thread(target=run, args=(d,)) for d in (first, second)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert sorted(outcomes) == ["skipped", "succeeded"]
    assert len(target.requests) == 1
