"""The management API (powertools APIGatewayHttpResolver); `functions/api/app.py` resolves events with `app`."""
from __future__ import annotations

from tickwork.api.app import app

__all__ = ["app"]
