"""Clients built once per execution environment and reused across warm invocations.

Handlers call `services()`; the local runtime and the tests call `configure()` first to swap the edges
(a thread-pool invoker instead of Lambda, a test database) without touching the handlers.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from tickwork.invoker import Invoker, LambdaInvoker
from tickwork.settings import Settings


@dataclass
class Services:
    settings: Settings
    db: Any  # psycopg_pool.ConnectionPool
    redis: Any  # redis.Redis or redis.cluster.RedisCluster
    invoker: Invoker | None = None

    def close(self) -> None:
        self.db.close()
        self.redis.close()


_lock = threading.Lock()
_services: Services | None = None


def connect_db(settings: Settings, max_size: int = 4) -> Any:
    from psycopg_pool import ConnectionPool

    # check_connection reopens a connection that broke while the Lambda was frozen.
    return ConnectionPool(
        settings.database_url,
        min_size=1,
        max_size=max_size,
        check=ConnectionPool.check_connection,
        kwargs={"autocommit": True},
        open=True,
    )


def connect_redis(settings: Settings) -> Any:
    import redis

    if settings.redis_url.startswith(("rediss+cluster://", "redis+cluster://")):
        from redis.cluster import RedisCluster

        return RedisCluster.from_url(settings.redis_url.replace("+cluster", ""), decode_responses=True)
    return redis.Redis.from_url(settings.redis_url, decode_responses=True)


def build_services(settings: Settings, invoker: Invoker | None = None, db_pool_size: int = 4) -> Services:
    if invoker is None and settings.executor_function_name:
        import boto3

        invoker = LambdaInvoker(boto3.client("lambda"), settings.executor_function_name)
    return Services(settings, connect_db(settings, db_pool_size), connect_redis(settings), invoker)


def services() -> Services:
    global _services
    with _lock:
        if _services is None:
            _services = build_services(Settings.from_env())
        return _services


def configure(new: Services | None) -> None:
    """Install (or with None, forget) the services the handlers use."""
    global _services
    with _lock:
        _services = new
