"""Poller Lambda: one tick per invocation (the Step Functions loop), or the maintenance pass (a schedule)."""
from __future__ import annotations

import time
from typing import Any

from tickwork.maintenance import handle_maintenance
from tickwork.poller import handle_tick
from tickwork.wiring import services


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if event.get("task") == "maintenance":
        return handle_maintenance(services(), time.time)
    return handle_tick(services(), time.time)
