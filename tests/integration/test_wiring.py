"""The connection pool: a connection that died while idle (a frozen Lambda) is replaced, not handed out."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator
from unittest import mock

import psycopg

from tests.integration.helpers import wait_for
from tickwork import wiring
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
