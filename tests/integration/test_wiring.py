"""The stores' clients: a connection that died while idle (a frozen Lambda) is replaced, not handed out, and a
store that stops answering fails the call within its timeout instead of holding it forever."""
from __future__ import annotations

import socket
import threading
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Iterator
from unittest import mock

import psycopg
import pytest
import redis

from tests.support import wait_for
from tickwork import wiring
from tickwork.errors import ConfigurationError
from tickwork.settings import Settings


class IdleClock:
    """The pool's idle clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@contextmanager
def pings() -> Iterator[list[int]]:
    """The backend pid of every ping (the empty statement the idle check sends) made meanwhile."""
    seen: list[int] = []
    execute = psycopg.Connection.execute

    def counted(conn: psycopg.Connection, query: Any, *args: Any, **kwargs: Any) -> Any:
        if query == "":
            seen.append(conn.info.backend_pid)
        return execute(conn, query, *args, **kwargs)

    with mock.patch.object(psycopg.Connection, "execute", counted):
        yield seen


def _backend_pid(pool: Any) -> int:
    """The pid behind the connection a checkout gets, once the connection is back in the pool (the pool
    takes it back, and notes when in `reset`, on a worker thread)."""
    with pool.connection() as conn:
        pid = int(conn.execute("SELECT pg_backend_pid()").fetchone()[0])
    assert wait_for(lambda: pool.get_stats()["pool_available"] == 1)
    return pid


def test_a_connection_killed_while_idle_is_replaced_before_use(settings: Settings) -> None:
    clock = IdleClock()
    pool = wiring.connect_db(settings, max_size=1, clock=clock)
    try:
        victim = _backend_pid(pool)
        with psycopg.connect(settings.database_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (victim,))
        clock.now += wiring.IDLE_PING_SECONDS + 1  # as if frozen for a while
        assert _backend_pid(pool) != victim
    finally:
        pool.close()


def test_a_connection_reused_at_once_is_not_pinged_and_one_left_idle_is(settings: Settings) -> None:
    clock = IdleClock()
    pool = wiring.connect_db(settings, max_size=1, clock=clock)
    try:
        first = _backend_pid(pool)  # a connection the check has not seen come back is pinged once
        with pings() as at_once:
            assert [_backend_pid(pool) for _ in range(3)] == [first] * 3
            clock.now += wiring.IDLE_PING_SECONDS  # idle exactly the limit: still fresh
            assert _backend_pid(pool) == first
        assert at_once == []
        clock.now += wiring.IDLE_PING_SECONDS + 0.001
        with pings() as after_idle:
            assert _backend_pid(pool) == first
        assert after_idle == [first]
    finally:
        pool.close()


@contextmanager
def silent_server() -> Iterator[int]:
    """A port that accepts TCP connections and never says a word: a store gone quiet behind a failover."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        listener.close()


def test_a_redis_that_stops_answering_fails_the_command_after_the_timeout(settings: Settings) -> None:
    with silent_server() as port:
        quiet = replace(settings, redis_url=f"redis://127.0.0.1:{port}/0", redis_timeout_seconds=1)
        client = wiring.connect_redis(quiet)
        failed: list[BaseException] = []

        def ping() -> None:
            try:
                client.ping()
            except BaseException as exc:  # noqa: BLE001 - the test inspects it
                failed.append(exc)

        caller = threading.Thread(target=ping, daemon=True)
        caller.start()
        # It fails after the 1 s timeout (redis-py retries once on a timeout, if at all): 10 s is a wide margin.
        caller.join(10)
        assert not caller.is_alive(), "the ping still waits on a Redis that never answers"
        assert failed and isinstance(failed[0], redis.RedisError), failed


def test_a_postgres_that_stops_answering_fails_the_connect_after_the_timeout(settings: Settings) -> None:
    with silent_server() as port:
        quiet = replace(settings, database_url=f"postgresql://postgres@127.0.0.1:{port}/postgres",
                        db_connect_timeout_seconds=2)
        pool = wiring.connect_db(quiet, max_size=1)
        try:
            # Without a connect timeout the pool's first connect waits on the silent server for good.
            assert wait_for(lambda: pool.get_stats().get("connections_errors", 0) >= 1, timeout=10)
        finally:
            pool.close(timeout=1)


def test_store_timeouts_are_settings_and_must_be_positive() -> None:
    env = {"DATABASE_URL": "postgresql://h/db", "REDIS_URL": "redis://h:6379/0"}
    defaults = Settings.from_env(env)
    assert (defaults.redis_timeout_seconds, defaults.db_connect_timeout_seconds) == (5, 5)
    tuned = Settings.from_env({**env, "TICKWORK_REDIS_TIMEOUT_SECONDS": "2", "TICKWORK_DB_CONNECT_TIMEOUT_SECONDS": "3"})
    assert (tuned.redis_timeout_seconds, tuned.db_connect_timeout_seconds) == (2, 3)
    with pytest.raises(ConfigurationError, match="TICKWORK_REDIS_TIMEOUT_SECONDS"):
        Settings.from_env({**env, "TICKWORK_REDIS_TIMEOUT_SECONDS": "0"})
