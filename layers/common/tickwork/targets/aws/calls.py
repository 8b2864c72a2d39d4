"""An AWS kind's attempt (tickwork.interfaces.Attempt): everything made ready ahead (the role's session, its client
and connections, the rendered call), and the call made at the instant on a thread of the executor's.

An SDK call blocks until the service answers, so `fire` hands it to `calls` (a concurrent.futures Executor the
executor environment keeps: a queue put, no thread started on the instant's path while one is idle), and
`complete` waits for it until the attempt's deadline. A call that has not answered by then is a timeout, though the
service may still act on it (botocore waits on as long as the longest attempt may): a retry calls again, which a
FIFO queue and a Step Functions execution name recognise as the same run, and the other services do not.
"""
from __future__ import annotations

import time
from concurrent.futures import Executor, Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import replace
from typing import Any, Callable

from tickwork.outcome import Failure, FailureKind, Outcome


class CallAttempt:
    """`invoke` makes the call and classifies its answer (it never raises) on a thread of `calls`; `deadline` is
    time.monotonic()'s. With a `failure`, nothing is called: completing it reports the failure."""

    def __init__(self, invoke: Callable[[], Outcome] | None, calls: Executor | None, deadline: float, action: str,
                 failure: Failure | None = None) -> None:
        self._invoke, self.calls, self.deadline, self.action = invoke, calls, deadline, action
        self.failure = failure
        self._future: Future[Outcome] | None = None
        self._fired = 0.0

    @classmethod
    def failed(cls, failure: Failure) -> CallAttempt:
        return cls(None, None, 0.0, "", failure)

    def warm_lead(self) -> float | None:
        return None  # the client and its connection were made ready by prepare

    def warm(self, within: float) -> None:
        pass

    def fire(self) -> None:
        if self.failure is not None or self._invoke is None or self.calls is None or self._future is not None:
            return
        self._fired = time.monotonic()
        if self._fired >= self.deadline:
            self.failure = Failure(FailureKind.TIMEOUT, f"{self.action} not called: the attempt's time ran out first")
            return
        try:
            self._future = self.calls.submit(self._invoke)
        except RuntimeError:  # the pool was shut down: the environment is going away
            self.failure = Failure(FailureKind.CONNECTION, f"{self.action} not called: the executor is stopping")

    def finish_write(self) -> None:
        pass

    def awaiting(self) -> tuple[Any | None, float]:
        return None, 0.0  # complete() waits on the call's thread

    def complete(self) -> Outcome:
        if self._future is None:
            self.fire()
        if self._future is None:  # it failed before the call, or was abandoned
            return Outcome.failed(self.failure or Failure(FailureKind.CONNECTION, f"{self.action} was not called"))
        try:
            outcome = self._future.result(timeout=max(self.deadline - time.monotonic(), 0.0))
        except FutureTimeout:
            failure = Failure(FailureKind.TIMEOUT, f"{self.action} did not answer in time (the service may still "
                                                   "act on the call)")
            return Outcome.failed(failure, self._elapsed_ms())
        return replace(outcome, duration_ms=self._elapsed_ms())

    def abandon(self) -> None:
        self._invoke = None

    def _elapsed_ms(self) -> int:
        return int((time.monotonic() - self._fired) * 1000)

