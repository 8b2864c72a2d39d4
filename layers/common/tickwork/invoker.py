"""How the poller hands due runs to executors: Lambda async invoke in AWS, a thread pool locally."""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Protocol, Sequence

from tickwork.models import Dispatch, executor_event


class Invoker(Protocol):
    """Hands dispatches to executors without waiting for them to run.

    Contract: when `invoke` returns, every dispatch has been accepted for at-least-once execution;
    when it raises, some may not have been, and the sweeper re-dispatches executions left `queued`.
    """

    def invoke(self, dispatches: Sequence[Dispatch]) -> None: ...


class LambdaInvoker:
    """Asynchronous (InvocationType=Event) invoke of the executor function: Lambda queues and retries it."""

    def __init__(self, client: Any, function_name: str) -> None:
        self._client = client
        self._function_name = function_name

    def invoke(self, dispatches: Sequence[Dispatch]) -> None:
        for dispatch in dispatches:
            self._client.invoke(
                FunctionName=self._function_name,
                InvocationType="Event",
                Payload=json.dumps(executor_event([dispatch])).encode(),
            )


class ThreadPoolInvoker:
    """Local runtime: runs the executor handler on a pool of threads, like many concurrent Lambdas."""

    def __init__(self, handler: Callable[[dict[str, Any], Any], Any], max_workers: int = 64) -> None:
        self._handler = handler
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="executor")

    def invoke(self, dispatches: Sequence[Dispatch]) -> None:
        for dispatch in dispatches:
            self._pool.submit(self._handler, executor_event([dispatch]), None)

    def shutdown(self, wait: bool = True) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=not wait)
