"""Migrations Lambda: the schema migration a deploy runs (a CloudFormation custom resource), answered to
CloudFormation on every path before this function's own timeout (tickwork.ops.provisioning)."""
from __future__ import annotations

from typing import Any

from tickwork.logs import function_logger, with_lambda_context
from tickwork.ops.custom_resource import budget_seconds
from tickwork.ops.provisioning import handle_custom_resource, migrate_schema
from tickwork.wiring import services

logger = function_logger()


@with_lambda_context(logger)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    budget = budget_seconds(context)
    return handle_custom_resource(event, lambda: migrate_schema(services().db, budget), budget)
