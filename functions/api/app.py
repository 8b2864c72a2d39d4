"""API Lambda: the management API (jobs, executions, schedule preview) behind API Gateway HTTP API 2.0,
its Lambda authorizer, and the operator's admin actions by direct invoke ({"admin": "create-tenant", ...},
{"admin": "rotate-encryption-key"})."""
from __future__ import annotations

import threading
from typing import Any

from tickwork.admin import handle_admin, is_admin_event
from tickwork.api import app
from tickwork.authorizer import authorize, is_authorizer_event
from tickwork.wiring import services

# The resolver keeps the current request in shared state. Lambda sends one request at a time per
# environment; the local runtime's threaded server does not, so requests take turns here too.
_one_request_at_a_time = threading.Lock()


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if is_admin_event(event):
        return handle_admin(services().db, event, services().keyring)
    if is_authorizer_event(event):
        return authorize(services().db, event)
    with _one_request_at_a_time:
        return app.resolve(event, context)
