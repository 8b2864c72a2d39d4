"""How the poller hands due runs to executors in AWS: Lambda asynchronous invoke, runs grouped under a burst.

The local runtime's invoker, a thread pool, is tickwork_local.executors.ThreadPoolInvoker.
"""
from __future__ import annotations

import json
import math
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, Sequence

from tickwork.models import Dispatch, executor_event

# At normal load every run gets its own executor. Past this many dispatches in one hand-off (a burst),
# runs are grouped so 10,000 due jobs need a few hundred executors, not 10,000.
BURST_THRESHOLD = 20
# A burst is spread over about this many invocations per hand-off...
INVOCATIONS_PER_BURST_BATCH = 10
# ...with at most this many runs per invocation (the executor sends them concurrently).
MAX_GROUP_SIZE = 50
# Concurrent Invoke API calls from one poller: each is a ~10-30 ms round trip to Lambda.
INVOKE_CONCURRENCY = 16


def group_dispatches(dispatches: Sequence[Dispatch]) -> list[list[Dispatch]]:
    """One dispatch per invocation at normal load; groups of up to MAX_GROUP_SIZE under a burst."""
    if len(dispatches) <= BURST_THRESHOLD:
        return [[d] for d in dispatches]
    size = min(MAX_GROUP_SIZE, math.ceil(len(dispatches) / INVOCATIONS_PER_BURST_BATCH))
    return [list(dispatches[i:i + size]) for i in range(0, len(dispatches), size)]


class LambdaInvoker:
    """Asynchronous (InvocationType=Event) invoke of the executor function: Lambda queues and retries it."""

    def __init__(self, client: Any, function_name: str, concurrency: int = INVOKE_CONCURRENCY) -> None:
        self._client = client
        self._function_name = function_name
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="invoke")

    def invoke(self, dispatches: Sequence[Dispatch]) -> None:
        futures = [self._pool.submit(self._invoke_one, group) for group in group_dispatches(dispatches)]
        wait(futures)
        failures = [f.exception() for f in futures if f.exception() is not None]
        if failures:
            raise failures[0]  # type: ignore[misc]

    def _invoke_one(self, group: list[Dispatch]) -> None:
        self._client.invoke(
            FunctionName=self._function_name,
            InvocationType="Event",
            Payload=json.dumps(executor_event(group)).encode(),
        )
