"""The connection pool: a connection that died while idle (a frozen Lambda) is replaced, not handed out."""
from __future__ import annotations

from unittest import mock

import psycopg

from tickwork import wiring
from tickwork.settings import Settings


def test_a_connection_killed_while_idle_is_replaced_before_use(settings: Settings) -> None:
    pool = wiring.connect_db(settings, max_size=1)
    try:
        with pool.connection() as conn:
            victim = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        with psycopg.connect(settings.database_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (victim,))
        with mock.patch.object(wiring, "IDLE_PING_SECONDS", 0.0):  # as if frozen for a while
            with pool.connection() as conn:
                assert conn.execute("SELECT pg_backend_pid()").fetchone()[0] != victim
    finally:
        pool.close()


def test_a_connection_reused_at_once_is_not_pinged(settings: Settings) -> None:
    pool = wiring.connect_db(settings, max_size=1)
    try:
        with pool.connection() as conn:
            conn.execute("SELECT 1")
        with mock.patch("psycopg.Connection.execute", wraps=None) as execute:
            execute.side_effect = AssertionError("pinged")
            with pool.connection():
                pass
    finally:
        pool.close()
