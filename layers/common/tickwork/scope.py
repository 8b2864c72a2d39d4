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
class Actor:
    """Who makes a change, as the audit log records it (tickwork.tenant.audit): the API key (its id and name,
    never the key itself), the request and the client's address; or a service acting for the tenant, which
    names itself in `key_name` (`cloudformation:<stack>`) and has no key."""

    key_id: str | None = None
    key_name: str | None = None
    request_id: str | None = None
    client_ip: str | None = None


@dataclass(frozen=True)
class Scope:
    """Who is asking and when."""

    db: Any  # psycopg_pool.ConnectionPool
    index: DueIndex
    settings: Settings
    tenant_id: str
    now: datetime
    keyring: Keyring | None = None  # seals sensitive values (Services.keyring)
    scopes: frozenset[str] = frozenset()  # the API key's (tickwork.tenant.access)
    actor: Actor | None = None  # who the audit log says made a change; None: nobody to name (tests, operations)

    @property
    def key_id(self) -> str | None:
        """The API key asking (its actor's); None for what no key asks (a service, operations, tests)."""
        return self.actor.key_id if self.actor is not None else None
