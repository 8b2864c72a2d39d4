"""The connection budget's knobs as the handlers' pool gets them, on the real Postgres: the pool bound per
environment (TICKWORK_DB_POOL_SIZE) and no prepared statements behind RDS Proxy."""
from __future__ import annotations

from dataclasses import replace

import pytest

from tickwork import wiring
from tickwork.settings import Settings


@pytest.fixture
def fresh_services(settings: Settings, monkeypatch: pytest.MonkeyPatch):
    """services() as a cold Lambda environment runs it, the test's own services put back afterwards."""
    saved = wiring._services
    wiring.configure(None)
    monkeypatch.setenv("DATABASE_URL", settings.database_url)
    monkeypatch.setenv("REDIS_URL", settings.redis_url)
    monkeypatch.delenv("EXECUTOR_FUNCTION_NAME", raising=False)
    yield
    if wiring._services is not None:
        wiring._services.close()
    wiring.configure(saved)


def test_the_handlers_pool_is_bounded_by_the_environment(fresh_services, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TICKWORK_DB_POOL_SIZE", "2")
    pool = wiring.services().db
    assert pool.max_size == 2
    with pool.connection(), pool.connection():
        with pytest.raises(Exception, match="couldn't get a connection"):
            with pool.connection(timeout=0.2):
                pass


def _prepared_after_repeats(settings: Settings) -> int:
    pool = wiring.connect_db(settings, max_size=1)
    try:
        with pool.connection() as conn:
            for _ in range(8):  # past psycopg's prepare threshold of 5
                conn.execute("SELECT 1 WHERE %s::int > 0", (1,))
            return int(conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()[0])
    finally:
        pool.close()


def test_prepared_statements_are_off_when_told_and_on_by_default(settings: Settings) -> None:
    assert _prepared_after_repeats(settings) > 0
    assert _prepared_after_repeats(replace(settings, db_prepared_statements=False)) == 0
