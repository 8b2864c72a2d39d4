"""Jobs resource Lambda: the `Custom::TickworkJob` provider other stacks reach through the exported
service token, answering CloudFormation on every path before this function's own timeout
(tickwork.ops.job_resource)."""
from __future__ import annotations

from typing import Any

from tickwork.logs import function_logger, with_lambda_context
from tickwork.ops.custom_resource import budget_seconds
from tickwork.ops.job_resource import handle_job_resource
from tickwork.wiring import services

logger = function_logger()


@with_lambda_context(logger)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return handle_job_resource(services, event, budget_seconds(context))
