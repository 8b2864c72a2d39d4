"""Poller Lambda: one tick per invocation (the Step Functions loop), the maintenance pass (a schedule), or
the schema migration (a CloudFormation custom resource, at deploy time)."""
from __future__ import annotations

import time
from typing import Any

from tickwork.logs import function_logger, with_lambda_context
from tickwork.poller import handle_tick
from tickwork.provisioning import checkout_seconds, handle_custom_resource, is_custom_resource_event, migrate_schema
from tickwork.wiring import services

logger = function_logger()


@with_lambda_context(logger)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if is_custom_resource_event(event):
        return handle_custom_resource(event, lambda: migrate_schema(services().db, checkout_seconds(context)))
    if event.get("task") == "maintenance":
        from tickwork.maintenance import handle_maintenance  # every few minutes: not on a tick's cold start

        return handle_maintenance(services(), time.time)
    return handle_tick(services(), time.time)
