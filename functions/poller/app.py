"""Poller Lambda: one tick per invocation, driven by the Step Functions loop."""
from __future__ import annotations

import time
from typing import Any

from tickwork.poller import handle_tick
from tickwork.wiring import services


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return handle_tick(services(), time.time)
