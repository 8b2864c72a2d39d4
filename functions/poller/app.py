"""Poller Lambda: one tick per invocation (the Step Functions loop), or the maintenance pass (a schedule).
The schema migration a deploy runs has a function of its own (functions/migrations)."""
from __future__ import annotations

import time
from typing import Any

from tickwork.dispatch.poller import handle_tick
from tickwork.logs import function_logger, with_lambda_context
from tickwork.wiring import services

logger = function_logger()


@with_lambda_context(logger)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if event.get("task") == "maintenance":
        from tickwork.ops.maintenance import handle_maintenance  # every few minutes: not on a tick's cold start

        return handle_maintenance(services(), time.time)
    return handle_tick(services(), time.time)
