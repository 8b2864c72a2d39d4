"""Overlap policies, decided by the executor at each run's instant, against real Postgres and HTTP."""
from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

from tests.conftest import Target
from tests.integration.helpers import due_index, executions, executor_at, insert_job
from tests.support import FakeClock, score_of, wait_for
from tickwork.dispatch.poller import Poller
from tickwork.models import Dispatch
from tickwork.timeutil import to_ms
from tickwork.wiring import Services

T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)
SECOND = timedelta(seconds=1)


def _three_runs(services: Services, target: Target, overlap: str) -> tuple[str, list[Dispatch]]:
    job_id = insert_job(services, schedule="* * * * * *", next_run_at=T0, url=target.url + "/slow")
    with services.db.connection() as conn:
        conn.execute("UPDATE jobs SET overlap = %s WHERE id = %s", (overlap, job_id))
    for second in range(3):
        Poller(services).tick(to_ms(T0 + second * SECOND) - services.settings.lookahead_ms)
    dispatches = list(services.invoker.dispatches)  # type: ignore[union-attr]
    assert [d.fire_at_ms for d in dispatches] == [to_ms(T0 + s * SECOND) for s in range(3)]
    return job_id, dispatches


def _start_held_first_run(
    services: Services, target: Target, clock: FakeClock, first: Dispatch,
) -> tuple[threading.Thread, threading.Event]:
    """The first run sent at its instant, its response held (the run in progress) until the gate opens."""
    gate = target.gates["/slow"] = threading.Event()
    thread = threading.Thread(target=executor_at(services, clock).run, args=([first],))
    thread.start()
    assert wait_for(lambda: bool(target.requests))
    del target.gates["/slow"]  # requests sent from here on are answered at once; the first stays held
    return thread, gate


def _run_row(services: Services, execution_id: str) -> tuple[str, str | None]:
    with services.db.connection() as conn:
        return conn.execute("SELECT status, last_error FROM executions WHERE id = %s", (execution_id,)).fetchone()


def test_skip_records_a_skipped_run_while_the_previous_one_is_in_progress(services: Services, target: Target) -> None:
    job_id, (first, second, _) = _three_runs(services, target, "skip")
    clock = FakeClock(T0)
    thread, gate = _start_held_first_run(services, target, clock, first)
    assert executor_at(services, clock).run([second]) == ["skipped"]
    gate.set()
    thread.join()
    assert _run_row(services, first.execution_id)[0] == "succeeded"
    status, note = _run_row(services, second.execution_id)
    assert status == "skipped" and note is not None and "still in progress" in note
    assert len(target.requests) == 1


def test_queue_one_runs_one_queued_run_after_the_current_one_and_skips_the_rest(
    services: Services, target: Target
) -> None:
    job_id, (first, second, third) = _three_runs(services, target, "queue_one")
    clock = FakeClock(T0)
    thread, gate = _start_held_first_run(services, target, clock, first)
    executor = executor_at(services, clock)
    assert executor.run([second]) == ["waiting"]  # judged at its instant, T0 + 1 s
    assert executor.run([third]) == ["skipped"]  # T0 + 2 s: one run already waits
    gate.set()
    thread.join()
    # The first run's end, at T0 + 2 s, released the waiting one into the due index at that instant.
    released_at = T0 + 2 * SECOND
    assert score_of(due_index(services), f"e:{second.execution_id}:1") == to_ms(released_at)
    services.invoker.dispatches.clear()  # type: ignore[union-attr]
    Poller(services).tick(to_ms(released_at))
    (following,) = [r[0] for r in executions(services, job_id) if r[1] == T0 + 3 * SECOND]
    assert services.invoker.dispatches == [  # type: ignore[union-attr]
        Dispatch(second.execution_id, 1, to_ms(released_at)), Dispatch(following, 1, to_ms(T0 + 3 * SECOND)),
    ]
    assert executor.run([Dispatch(second.execution_id, 1, to_ms(released_at))]) == ["succeeded"]
    statuses = [r[2] for r in executions(services, job_id)]
    assert statuses == ["succeeded", "succeeded", "skipped", "queued"]
    assert _run_row(services, third.execution_id)[1] == (
        "skipped: a run was already waiting for the one in progress (overlap queue_one)")
    assert len(target.requests) == 2


def test_allow_runs_overlapping_runs_side_by_side(services: Services, target: Target) -> None:
    job_id, (first, second, _) = _three_runs(services, target, "allow")
    clock = FakeClock(T0)
    thread, gate = _start_held_first_run(services, target, clock, first)
    assert executor_at(services, clock).run([second]) == ["succeeded"]
    assert _run_row(services, first.execution_id)[0] == "running"  # the second ran while the first did
    gate.set()
    thread.join()
    assert _run_row(services, first.execution_id)[0] == "succeeded"
    assert len(target.requests) == 2


def test_two_runs_starting_at_once_under_skip_do_not_both_run(services: Services, target: Target) -> None:
    job_id, (first, second, _) = _three_runs(services, target, "skip")
    gate = target.gates["/slow"] = threading.Event()  # the winner stays in progress until both have been judged
    outcomes: list[str] = []
    barrier = threading.Barrier(2)

    def run(dispatch: Dispatch) -> None:
        barrier.wait()
        outcomes.extend(executor_at(services, FakeClock(T0 + SECOND)).run([dispatch]))

    threads = [threading.Thread(target=run, args=(d,)) for d in (first, second)]
    [t.start() for t in threads]
    judged_while_running = wait_for(lambda: len(outcomes) == 1) and list(outcomes)
    gate.set()
    [t.join() for t in threads]
    assert judged_while_running == ["skipped"]
    assert sorted(outcomes) == ["skipped", "succeeded"]
    assert len(target.requests) == 1
