"""Executor Lambda: runs the dispatches the poller handed over (asynchronous invoke)."""
from __future__ import annotations

from typing import Any

from tickwork.logs import function_logger, with_lambda_context
from tickwork.models import dispatches_from_event
from tickwork.runs.executor import handle_event
from tickwork.wiring import services

logger = function_logger()


@with_lambda_context(logger)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return handle_event(services(), dispatches_from_event(event))
