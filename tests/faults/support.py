"""What the fault tests share: a clock base, the fault itself, and the invariants every test checks."""
from __future__ import annotations

import socket
from collections import Counter
from datetime import datetime, timedelta, timezone
from typing import Any, Sequence

from tests.conftest import RecordingInvoker, Target
from tests.integration.helpers import executions
from tickwork.dispatch.poller import Poller
from tickwork.models import Dispatch
from tickwork.runs.executor import Executor, http_client
from tickwork.timeutil import to_ms
from tickwork.wiring import Services

HOURLY = "0 * * * *"
FINAL = {"succeeded", "failed", "skipped", "missed", "lost"}


class Crash(BaseException):
    """The process dies here. Not an Exception: no handler of the code under test may treat a death as an error
    it can recover from (the poller sets aside an entry whose handling raises an Exception: quarantine)."""


def crash(*_: Any, **__: Any) -> Any:
    raise Crash()


# Longer than any test session: a slot this far ahead is still ahead when the last fault test runs.
SESSION_MARGIN = timedelta(hours=1)


def next_hour() -> datetime:
    """An hourly slot between one and two hours ahead: ticks are driven by explicit times from here, while
    rows the database stamps on its own clock (created_at, attempt_started_at) stay before it, as they
    would in production, however slow the session that imported this."""
    soon = datetime.now(timezone.utc) + SESSION_MARGIN
    return soon.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)


def execute(svc: Services, dispatches: Sequence[Dispatch], at: datetime) -> list[str]:
    """Run dispatches as an executor whose clock reads `at` (it never sleeps for the exact instant)."""
    return Executor(svc, http_client(), clock=lambda: at.timestamp(), sleep=lambda _: None).run(dispatches)


def slot_statuses(svc: Services, job_id: str) -> dict[datetime, str]:
    return {row[1]: row[2] for row in executions(svc, job_id)}


def sent(target: Target) -> list[tuple[str, str]]:
    """(run id, attempt) of every request the target received, in order."""
    return [(r["headers"]["Tickwork-Run-Id"], r["headers"]["Tickwork-Attempt"]) for r in target.requests]


def assert_no_double_run(invoker: RecordingInvoker, target: Target | None = None) -> None:
    """No attempt of any run was dispatched twice, nor sent twice."""
    dispatched = Counter((d.execution_id, d.attempt) for d in invoker.dispatches)
    assert max(dispatched.values(), default=1) == 1, dispatched
    if target is not None:
        requests = Counter(sent(target))
        assert max(requests.values(), default=1) == 1, requests


def next_slot_fires(
    svc: Services, invoker: RecordingInvoker, target: Target, job_id: str, at: datetime,
    before: dict[datetime, str],
) -> None:
    """After the fault: the job's following slot fires once, every earlier slot ended as `before` says,
    and nothing ran twice."""
    assert Poller(svc).tick(to_ms(at)).dispatched == 1
    assert execute(svc, invoker.dispatches[-1:], at) == ["succeeded"]
    assert slot_statuses(svc, job_id) == {**before, at: "succeeded"}
    assert_no_double_run(invoker, target)


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
