"""Migrations Lambda: the schema migration a deploy runs (a CloudFormation custom resource), answered to
CloudFormation on every path before this function's own timeout (tickwork.ops.provisioning)."""
from __future__ import annotations

from typing import Any

from tickwork.logs import function_logger, with_lambda_context
from tickwork.ops.custom_resource import budget_seconds
from tickwork.ops.provisioning import handle_migration
from tickwork.wiring import services

logger = function_logger()


@with_lambda_context(logger)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return handle_migration(services, event, budget_seconds(context))
