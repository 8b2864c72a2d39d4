"""The poller and executor Lambda handlers, driven by the sample events in events/ (as Lambda calls them)."""
from __future__ import annotations

import math
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

from tests.conftest import Target, load_event
from tests.integration.helpers import attempts, executions, insert_job
from tickwork.timeutil import parse_rfc3339
from tickwork.wiring import Services

Handler = Callable[[str], Callable[[dict[str, Any], Any], Any]]


def test_poller_handler_ticks_at_once_and_names_a_following_whole_second(services: Services, handler: Handler,
                                                                        target: Target) -> None:
    job_id = insert_job(services, schedule="0 0 1 1 *", next_run_at=datetime.now(timezone.utc) - timedelta(seconds=1),
                        url=target.url + "/hook")
    before = time.time()
    result = handler("poller")(load_event("poller_tick.json"), None)
    after = time.time()
    # Invoked as the loop's Wait ends (any time in the second, here): it ticks at once, claiming as of half past,
    # and names a following whole second, which the Wait can honour (a Timestamp counts whole seconds only).
    assert math.floor(before) + 1 <= parse_rfc3339(result["next_tick_at"]).timestamp() <= math.floor(after) + 1
    assert result["locked"] and result["dispatched"] == 1
    assert len(services.invoker.dispatches) == 1  # type: ignore[union-attr]
    assert [r[2] for r in executions(services, job_id)] == ["queued"]


def test_executor_handler_runs_the_dispatch_in_its_event(services: Services, handler: Handler, target: Target) -> None:
    insert_job(services, schedule="0 0 1 1 *", next_run_at=datetime.now(timezone.utc) - timedelta(seconds=1),
               url=target.url + "/hook")
    handler("poller")(load_event("poller_tick.json"), None)
    (dispatch,) = services.invoker.dispatches  # type: ignore[union-attr]
    event = load_event("executor_dispatch.json")
    event["dispatches"][0].update(execution_id=dispatch.execution_id, fire_at_ms=dispatch.fire_at_ms)

    assert handler("executor")(event, None) == {"outcomes": ["succeeded"]}
    assert handler("executor")(event, None) == {"outcomes": ["duplicate"]}  # Lambda delivered it twice
    assert len(target.requests) == 1
    assert [a[3] for a in attempts(services, dispatch.execution_id)] == [200]


def test_executor_handler_ignores_an_unknown_execution(services: Services, handler: Handler) -> None:
    assert handler("executor")(load_event("executor_dispatch.json"), None) == {"outcomes": ["duplicate"]}
