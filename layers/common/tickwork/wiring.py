"""Clients built once per execution environment and reused across warm invocations.

Handlers call `services()`; the local runtime and the tests call `configure()` first to swap the edges
(a thread-pool invoker instead of Lambda, its own Sender, a test database) without touching the handlers.
"""
from __future__ import annotations

import contextlib
import functools
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from tickwork.dispatch.invoker import LambdaInvoker
from tickwork.dueindex.index import DueIndex
from tickwork.dueindex.inflight import InFlight
from tickwork.interfaces import Invoker, Sender
from tickwork.runs.sending import BoundedSender
from tickwork.secrets.crypto import Keyring, KmsWrapper, LocalWrapper
from tickwork.settings import Settings


@dataclass
class Services:
    settings: Settings
    db: Any  # psycopg_pool.ConnectionPool
    redis: Any  # redis.Redis or redis.cluster.RedisCluster
    invoker: Invoker | None = None
    sender: Sender = field(default_factory=BoundedSender)  # how the executor sends a group of runs
    clock: Callable[[], float] = time.time  # the API's `now` per request (epoch seconds); tests pin it
    keyring: Keyring | None = None  # built from the settings when not given (None if they name no key)
    sns: Any = None  # boto3 SNS client for settings.operator_topic_arn (tickwork.notifications.deliver)

    def __post_init__(self) -> None:
        if self.keyring is None:
            self.keyring = build_keyring(self.settings)

    @functools.cached_property
    def index(self) -> DueIndex:
        """The due index, in the deployment's namespace and shard count: the one every caller uses."""
        return DueIndex(self.redis, self.settings.namespace, self.settings.due_index_shards)

    @functools.cached_property
    def in_flight(self) -> InFlight:
        """Each tenant's runs in flight (tickwork.dispatch.budget takes places, executors give them back)."""
        return InFlight(self.redis, self.settings.namespace)

    def close(self) -> None:
        self.sender.close()
        self.db.close()
        self.redis.close()


_lock = threading.Lock()
_services: Services | None = None


# A connection back in the pool for longer than this is pinged before reuse (it may have died while the
# Lambda was frozen); one used a moment ago is not, which saves a round trip on every hot-path checkout.
IDLE_PING_SECONDS = 5.0


class _IdleCheck:
    """Pool callbacks: `reset` notes when a connection came back, `check` pings only the idle ones."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._returned: dict[int, float] = {}
        self._clock = clock

    def reset(self, conn: Any) -> None:
        self._returned[id(conn)] = self._clock()

    def check(self, conn: Any) -> None:
        returned = self._returned.pop(id(conn), None)
        if returned is None or self._clock() - returned > IDLE_PING_SECONDS:
            conn.execute("")  # raises on a dead connection: the pool replaces it


class TimedPool:
    """A pool whose connections run under PostgreSQL's statement_timeout while checked out from here (the
    API's requests): a query that would outlast API Gateway's 29 s is cancelled by the server, raising
    psycopg.errors.QueryCanceled, instead of holding the connection and the database. Set and reset per
    checkout, so the pool stays shared with work that may legitimately run longer (the local runtime)."""

    def __init__(self, pool: Any, timeout_ms: int) -> None:
        self.pool = pool
        self._set = f"SET statement_timeout = {int(timeout_ms)}"

    @contextlib.contextmanager
    def connection(self, timeout: float | None = None) -> Iterator[Any]:
        with self.pool.connection(timeout=timeout) as conn:
            conn.execute(self._set)
            try:
                yield conn
            finally:
                if not (conn.closed or conn.broken):  # a broken one is discarded by the pool
                    conn.execute("RESET statement_timeout")


def api_pool(svc: Services) -> Any:
    """The pool the API's requests query through: timed unless the setting is 0."""
    timeout_ms = svc.settings.api_statement_timeout_ms
    return TimedPool(svc.db, timeout_ms) if timeout_ms > 0 else svc.db


def build_keyring(settings: Settings) -> Keyring | None:
    """Data keys from the stack's KMS key in AWS, from a key file (under the data directory) locally; None
    without either (what seals or opens a secret then raises ConfigurationError)."""
    if settings.kms_key_id:
        import boto3

        return Keyring(KmsWrapper(lambda: boto3.client("kms"), settings.kms_key_id))
    if settings.key_file:
        return Keyring(LocalWrapper(Path(settings.key_file)))
    return None


def connect_db(settings: Settings, max_size: int = 4, clock: Callable[[], float] = time.monotonic) -> Any:
    """A pool whose `clock` (seconds, any origin) tells how long a connection sat idle."""
    from psycopg_pool import ConnectionPool

    from tickwork.store.credentials import connection_class

    idle = _IdleCheck(clock)
    return ConnectionPool(
        settings.database_url,
        connection_class=connection_class(settings),
        min_size=1,
        max_size=max_size,
        check=idle.check,
        reset=idle.reset,
        # prepare_threshold None: never prepare (behind RDS Proxy); 5 is psycopg's default.
        kwargs={"autocommit": True, "prepare_threshold": 5 if settings.db_prepared_statements else None,
                **db_liveness_options(settings)},
        open=True,
    )


def db_liveness_options(settings: Settings) -> dict[str, Any]:
    """libpq options that end a connect to a silent server after the setting's seconds, and a connection
    whose server vanished (TCP keepalives while a query runs, unacknowledged writes after 30 s) instead of
    waiting on it for the kernel's ~15 minutes. No statement timeout here: the API's requests get theirs
    per checkout (TimedPool); the maintenance pass bounds its own work."""
    return {"connect_timeout": settings.db_connect_timeout_seconds, "keepalives": 1, "keepalives_idle": 30,
            "keepalives_interval": 5, "keepalives_count": 3, "tcp_user_timeout": 30_000}


def connect_redis(settings: Settings) -> Any:
    """A client whose every connect and command gives up after the setting's seconds (redis-py waits
    forever by default), raising redis.TimeoutError, a RedisError like any other failure of the cache."""
    import redis

    options = {"decode_responses": True, "socket_timeout": settings.redis_timeout_seconds,
               "socket_connect_timeout": settings.redis_timeout_seconds}
    if settings.redis_url.startswith(("rediss+cluster://", "redis+cluster://")):
        from redis.cluster import RedisCluster

        return RedisCluster.from_url(settings.redis_url.replace("+cluster", ""), **options)
    return redis.Redis.from_url(settings.redis_url, **options)


def build_services(
    settings: Settings, invoker: Invoker | None = None, db_pool_size: int = 4, sender: Sender | None = None,
) -> Services:
    if invoker is None and settings.executor_function_name:
        import boto3

        invoker = LambdaInvoker(boto3.client("lambda"), settings.executor_function_name)
    sns = None
    if settings.operator_topic_arn:
        import boto3

        sns = boto3.client("sns")
    return Services(settings, connect_db(settings, db_pool_size), connect_redis(settings), invoker,
                    sender or BoundedSender(), sns=sns)


def services() -> Services:
    global _services
    with _lock:
        if _services is None:
            settings = Settings.from_env()
            _services = build_services(settings, db_pool_size=settings.db_pool_size)
        return _services


def configure(new: Services | None) -> None:
    """Install (or with None, forget) the services the handlers use."""
    global _services
    with _lock:
        _services = new
