"""Scope: one tenant's request at one instant, what every tenant-facing service acts within.

Its own module (not tickwork.models: it holds a DueIndex and a Keyring) so that the services of jobs,
secrets, keys and stats can all take it without importing one another.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tickwork.dueindex.index import DueIndex
from tickwork.secrets.crypto import Keyring
from tickwork.settings import Settings


@dataclass(frozen=True)
class Scope:
    """Who is asking and when."""

    db: Any  # psycopg_pool.ConnectionPool
    index: DueIndex
    settings: Settings
    tenant_id: str
    now: datetime
    keyring: Keyring | None = None  # seals sensitive values (Services.keyring)
    key_id: str | None = None  # the API key asking; None for what no key asks (operations, tests)
    scopes: frozenset[str] = frozenset()  # the API key's (tickwork.tenant.access)
