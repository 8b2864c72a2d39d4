"""One tenant's notification receiver that accepts connections and never answers delays no other tenant's
notification in the same group: real Postgres, Redis, poller, executor, and a blackhole socket server.

Runs are fired on a FakeClock; what is asserted is order (which attempt is still in flight when another
tenant's arrives), never a duration.
"""
from __future__ import annotations

import contextlib
import json
import socket
import threading
from datetime import datetime, timedelta, timezone
from typing import Iterator

import pytest

from tests.conftest import Target
from tests.integration.helpers import executor_at, insert_job
from tests.support import FakeClock, wait_for
from tickwork.dispatch.poller import Poller
from tickwork.models import Dispatch
from tickwork.notifications.deliver import deliver
from tickwork.store import executions as executions_store
from tickwork.store.tenants import create_tenant
from tickwork.timeutil import to_ms
from tickwork.wiring import Services

T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)
# Bounds on waiting for another thread: never reached when it works, reached on the code before the fix only
# after the blackholed attempt's own timeout (10 s).
WAIT_SECONDS = 60


class Blackhole:
    """A TCP server that accepts every connection and never reads or answers, until closed."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.accepted: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                self.accepted.append(self.listener.accept()[0])
            except OSError:  # closed
                return

    def close(self) -> None:
        with contextlib.suppress(OSError):  # closed already
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept and refuses new connections
        self.listener.close()
        self._thread.join(WAIT_SECONDS)
        for conn in self.accepted:
            conn.close()  # the attempt held on it ends at once (connection reset), not at its timeout


@pytest.fixture
def blackhole() -> Iterator[Blackhole]:
    server = Blackhole()
    yield server
    server.close()


def _failed_run_notifying(services: Services, tenant: str, target: Target, notify_url: str) -> str:
    """A job of `tenant` whose run fails once, notifying `notify_url`; returns the job's id."""
    job_id = insert_job(services, schedule="0 0 1 1 *", next_run_at=T0 + timedelta(days=30), tenant_id=tenant,
                        url=target.url + "/hook", retry={"max_attempts": 1})
    with services.db.connection() as conn:
        conn.execute("UPDATE jobs SET notify = %s WHERE id = %s",
                     (json.dumps({"url": notify_url + "/events", "on": ["failure"]}), job_id))
        execution_id = executions_store.insert_manual(conn, tenant, job_id, T0)
    assert executor_at(services, FakeClock(T0)).run([Dispatch(execution_id, 1, to_ms(T0))]) == ["failed"]
    return job_id


def _notification_status(services: Services, job_id: str) -> str:
    with services.db.connection() as conn:
        return str(conn.execute("SELECT status FROM notifications WHERE job_id = %s", (job_id,)).fetchone()[0])


def test_a_silent_receiver_of_one_tenant_does_not_hold_back_another_tenants_notification(
    services: Services, target: Target, notify_target: Target, blackhole: Blackhole,
) -> None:
    with services.db.connection() as conn:
        quiet, other = create_tenant(conn, "quiet"), create_tenant(conn, "other")
    target.default_status = 500
    silent_job = _failed_run_notifying(services, quiet, target, blackhole.url)
    other_job = _failed_run_notifying(services, other, target, notify_target.url)
    services.invoker.dispatches.clear()  # type: ignore[union-attr]
    Poller(services).tick(to_ms(T0))
    notes = [d for d in services.invoker.dispatches if d.kind == "notification"]  # type: ignore[union-attr]
    with services.db.connection() as conn:
        silent_ids = {r[0] for r in conn.execute("SELECT id::text FROM notifications WHERE job_id = %s", (silent_job,))}
    notes.sort(key=lambda d: d.execution_id not in silent_ids)  # the silent one first in the group
    assert len(notes) == 2 and notes[0].execution_id in silent_ids

    executor = executor_at(services, FakeClock(T0))
    outcomes: list[str] = []
    delivering = threading.Thread(
        target=lambda: outcomes.extend(deliver(executor, services, executor.clock, executor.uniform, notes)))
    delivering.start()
    try:
        # Both sent (each lane starts its attempt before connecting, whichever thread goes first)...
        assert wait_for(lambda: len(notify_target.requests) == 1 and len(blackhole.accepted) == 1,
                        timeout=WAIT_SECONDS)
        # ...the other tenant's while the silent receiver still holds the first attempt, not after its timeout.
        assert _notification_status(services, silent_job) == "sending"
    finally:
        blackhole.close()
        delivering.join(WAIT_SECONDS)
    assert outcomes == ["pending", "delivered"]  # the silent receiver's is retried later, as any failure
    assert _notification_status(services, other_job) == "delivered"
