"""How the poller hands due runs to executors in AWS: Lambda asynchronous invoke, runs grouped under a burst.

The local runtime's invoker, a thread pool, is tickwork_local.executors.ThreadPoolInvoker.
"""
from __future__ import annotations

import itertools
import json
import math
import time
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, Callable, Sequence

from tickwork.models import Dispatch, executor_event

# At normal load every run gets its own executor. Past this many dispatches in one hand-off (a burst),
# runs are grouped so 10,000 due jobs need a few hundred executors, not 10,000.
BURST_THRESHOLD = 20
# A burst is spread over about this many invocations per hand-off...
INVOCATIONS_PER_BURST_BATCH = 10
# ...with at most this many runs per invocation (the executor sends them concurrently).
MAX_GROUP_SIZE = 50
# Runs handed over this long before their instant (a heavy instant the adaptive lookahead claimed early)
# wait in their executor until then, and each waiting invocation holds one unit of the executor's
# concurrency. They are grouped larger, so 10,000 runs at 00:00:00 wait in 40 invocations, not 200: with
# 200, a concurrency of 64 (the benchmark's) or a new account's 10 holds only the first groups, and the rest
# start after the instant. The base lookahead (1.5 s) never reaches this lead, so normal load is unchanged.
EARLY_LEAD_MS = 2_000
EARLY_INVOCATIONS_PER_BURST_BATCH = 4
MAX_EARLY_GROUP_SIZE = 250
# Concurrent Invoke API calls from one poller: each is a ~10-30 ms round trip to Lambda.
INVOKE_CONCURRENCY = 16


def group_dispatches(dispatches: Sequence[Dispatch], now_ms: int | None = None) -> list[list[Dispatch]]:
    """One dispatch per invocation at normal load; groups of up to MAX_GROUP_SIZE under a burst, and of up
    to MAX_EARLY_GROUP_SIZE when every run is due EARLY_LEAD_MS or more after `now_ms`.

    An executor sends its group's instants one after the other (tickwork.runs.sending), so a group holds the
    runs of one instant, or runs each alone at its instant (replays, retries) in instant order: the slots a
    whole second shares never wait behind another tenant's replays paced a few milliseconds apart."""
    if len(dispatches) <= BURST_THRESHOLD:
        return [[d] for d in dispatches]
    early = now_ms is not None and min(d.fire_at_ms for d in dispatches) - now_ms >= EARLY_LEAD_MS
    per_batch, cap = ((EARLY_INVOCATIONS_PER_BURST_BATCH, MAX_EARLY_GROUP_SIZE) if early
                      else (INVOCATIONS_PER_BURST_BATCH, MAX_GROUP_SIZE))
    size = min(cap, math.ceil(len(dispatches) / per_batch))
    return [group for lot in _lots(dispatches) for group in _even_parts(lot, size)]


def _lots(dispatches: Sequence[Dispatch]) -> list[list[Dispatch]]:
    """The dispatches in instant order, cut where an instant that several runs share begins and ends: each lot
    is one such instant's runs, or the runs alone at their instants between two of them."""
    lots: list[list[Dispatch]] = []
    alone: list[Dispatch] = []
    for _, same in itertools.groupby(sorted(dispatches, key=lambda d: d.fire_at_ms), key=lambda d: d.fire_at_ms):
        runs = list(same)
        if len(runs) == 1:
            alone += runs
            continue
        if alone:
            lots.append(alone)
            alone = []
        lots.append(runs)
    return lots + [alone] if alone else lots


def _even_parts(lot: list[Dispatch], size: int) -> list[list[Dispatch]]:
    """The lot in as few groups of at most `size` as it takes, their sizes within one of each other."""
    parts = math.ceil(len(lot) / size)
    cuts = [round(i * len(lot) / parts) for i in range(parts + 1)]
    return [lot[start:end] for start, end in zip(cuts, cuts[1:])]


def wall_clock_ms() -> int:
    """The invokers' clock for group_dispatches: they are the edge that hands runs to executors."""
    return int(time.time() * 1000)


class LambdaInvoker:
    """Asynchronous (InvocationType=Event) invoke of the executor function: Lambda queues and retries it."""

    def __init__(self, client: Any, function_name: str, concurrency: int = INVOKE_CONCURRENCY,
                 clock_ms: Callable[[], int] = wall_clock_ms) -> None:
        self._client = client
        self._function_name = function_name
        self._clock_ms = clock_ms
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="invoke")

    def invoke(self, dispatches: Sequence[Dispatch]) -> None:
        groups = group_dispatches(dispatches, self._clock_ms())
        futures = [self._pool.submit(self._invoke_one, group) for group in groups]
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
