"""tickwork.runs.pool.ElasticPool: tasks blocked on a target get threads added beside them; quick tasks
keep to the core threads.

Real threads; events with generous timeouts. Every check of "not yet" or "no thread added" is over a
short wait that a loaded machine can only make pass, never fail falsely.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Iterator

import pytest

from tests.support import wait_for
from tickwork.runs.pool import ElasticPool

WAIT_SECONDS = 10.0
STUCK_AFTER = 0.1


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at the end of each test, so no blocked task outlives it."""
    event = threading.Event()
    yield event
    event.set()


def _pool(core: int, **options: float) -> ElasticPool:
    return ElasticPool(core, stuck_after=STUCK_AFTER, name="test", **options)  # type: ignore[arg-type]


def _blocker(release: threading.Event, started: threading.Semaphore) -> Callable[[], str]:
    def task() -> str:
        started.release()
        assert release.wait(WAIT_SECONDS)
        return "released"

    return task




def test_tasks_give_their_results_and_their_exceptions() -> None:
    pool = _pool(2)
    try:
        assert [f.result(WAIT_SECONDS) for f in [pool.submit(pow, 2, n) for n in range(5)]] == [1, 2, 4, 8, 16]
        with pytest.raises(ZeroDivisionError):
            pool.submit(lambda: 1 / 0).result(WAIT_SECONDS)
    finally:
        pool.shutdown()


def test_a_task_waiting_behind_blocked_ones_gets_a_thread_added_for_it(release: threading.Event) -> None:
    pool, started = _pool(2), threading.Semaphore(0)
    try:
        blocked = [pool.submit(_blocker(release, started)) for _ in range(2)]
        assert started.acquire(timeout=WAIT_SECONDS) and started.acquire(timeout=WAIT_SECONDS)
        assert pool.submit(lambda: "ran").result(WAIT_SECONDS) == "ran"  # with a fixed pool: never, until released
        assert pool.threads >= 3
        assert not any(f.done() for f in blocked)
        release.set()
        assert [f.result(WAIT_SECONDS) for f in blocked] == ["released"] * 2
    finally:
        pool.shutdown()


def test_quick_tasks_keep_to_the_core_threads() -> None:
    pool = ElasticPool(2, stuck_after=2.0)  # a 1 ms task this late would take a machine all but stopped
    try:
        for _ in range(5):
            futures = [pool.submit(time.sleep, 0.001) for _ in range(100)]
            assert all(f.result(WAIT_SECONDS) is None for f in futures)
            assert pool.threads == 2
    finally:
        pool.shutdown()


def test_added_threads_leave_once_the_blocked_tasks_end(release: threading.Event) -> None:
    pool, started = _pool(1, idle_exit=0.2), threading.Semaphore(0)
    try:
        blocked = pool.submit(_blocker(release, started))
        assert started.acquire(timeout=WAIT_SECONDS)
        assert pool.submit(lambda: "ran").result(WAIT_SECONDS) == "ran"
        assert pool.threads == 2
        release.set()
        assert blocked.result(WAIT_SECONDS) == "released"
        assert wait_for(lambda: pool.threads == 1)
        assert pool.submit(lambda: "still runs").result(WAIT_SECONDS) == "still runs"
    finally:
        pool.shutdown()


def test_an_added_thread_leaves_after_its_task_once_nothing_is_stuck_even_with_work_coming(
    release: threading.Event,
) -> None:
    """Work that keeps coming would keep an added thread from ever being idle: it leaves because the core
    is free again, not because it waited for work."""
    pool, started = _pool(1), threading.Semaphore(0)  # idle_exit of 10 s: never reached here
    try:
        blocked = pool.submit(_blocker(release, started))
        assert started.acquire(timeout=WAIT_SECONDS)
        assert pool.submit(lambda: "ran").result(WAIT_SECONDS) == "ran"
        release.set()
        assert blocked.result(WAIT_SECONDS) == "released"
        assert wait_for(lambda: (pool.submit(time.sleep, 0.001).result(WAIT_SECONDS), pool.threads)[1] == 1)
    finally:
        pool.shutdown()


def test_the_pool_never_has_more_than_most_threads(release: threading.Event) -> None:
    pool, started = _pool(1, most=2), threading.Semaphore(0)
    try:
        blocked = [pool.submit(_blocker(release, started)) for _ in range(2)]
        assert started.acquire(timeout=WAIT_SECONDS) and started.acquire(timeout=WAIT_SECONDS)
        waiting = pool.submit(lambda: "ran")
        time.sleep(5 * STUCK_AFTER)
        assert not waiting.done() and pool.threads == 2
        release.set()
        assert waiting.result(WAIT_SECONDS) == "ran"
        assert [f.result(WAIT_SECONDS) for f in blocked] == ["released"] * 2
    finally:
        pool.shutdown()


def test_shutdown_runs_what_was_submitted_then_refuses_more(release: threading.Event) -> None:
    pool, started = _pool(1, most=1), threading.Semaphore(0)
    blocked = pool.submit(_blocker(release, started))
    queued = pool.submit(lambda: "queued")
    assert started.acquire(timeout=WAIT_SECONDS)
    release.set()
    pool.shutdown()
    assert (blocked.result(0), queued.result(0)) == ("released", "queued")
    assert pool.threads == 0
    with pytest.raises(RuntimeError):
        pool.submit(lambda: None)


def test_shutdown_with_cancel_futures_cancels_what_has_not_started(release: threading.Event) -> None:
    pool, started = _pool(1, most=1), threading.Semaphore(0)
    blocked = pool.submit(_blocker(release, started))
    queued = pool.submit(lambda: "queued")
    assert started.acquire(timeout=WAIT_SECONDS)
    pool.shutdown(wait=False, cancel_futures=True)
    release.set()
    assert blocked.result(WAIT_SECONDS) == "released"
    assert queued.cancelled()
    assert wait_for(lambda: pool.threads == 0)
