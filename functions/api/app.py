"""API Lambda: the management API (jobs, executions, schedule preview) behind API Gateway HTTP API 2.0,
its Lambda authorizer, and the operator's admin actions by direct invoke ({"admin": "create-tenant", ...},
{"admin": "create-api-key", ...}, {"admin": "rotate-encryption-key"}, {"admin": "release-quarantine", ...})."""
from __future__ import annotations

import threading
from typing import Any

from tickwork.api.admin import handle_admin, is_admin_event
from tickwork.api.authorizer import authorize, is_authorizer_event
from tickwork.logs import function_logger, with_lambda_context
from tickwork.rules.completion import loggable_path
from tickwork.wiring import services

# The resolver keeps the current request in shared state. Lambda sends one request at a time per
# environment; the local runtime's threaded server does not, so requests take turns here too.
_one_request_at_a_time = threading.Lock()
# The parent of every tickwork module's child logger: their records come out as JSON lines.
logger = function_logger()


@with_lambda_context(logger)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if is_admin_event(event):
        return handle_admin(services(), event)
    if is_authorizer_event(event):
        return authorize(services().db, event)
    with _one_request_at_a_time:
        response = _resolver().resolve(event, context)
    # The path (a callback's token masked), never the query string or headers: they may carry a key.
    http = event.get("requestContext", {}).get("http", {})
    logger.info("request answered", extra={"method": http.get("method"), "path": loggable_path(event.get("rawPath")),
                                           "status": response.get("statusCode")})
    return response


def _resolver() -> Any:
    """The routes, their models and the OpenAPI machinery: loaded by the first HTTP request, not at import,
    so an environment that only authorizes (or runs an admin operation) never pays for them."""
    from tickwork.api.app import app

    return app
