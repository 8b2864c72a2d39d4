"""The `tickwork` command: Tickwork's HTTPS API from a shell (docs/jobs-as-code.md)."""
from __future__ import annotations

__version__ = "0.1.0"
