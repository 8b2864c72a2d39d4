"""The API's statement timeout against the real PostgreSQL: a query past it is cancelled by the server and
answered 503 in the API's error shape, and the shared pool's connections come back without it."""
from __future__ import annotations

from typing import Any

import pytest
from psycopg.errors import QueryCanceled

from tests.integration.api_client import Api, use_settings
from tickwork.wiring import Services, TimedPool, api_pool
from tickwork.wiring import services as current_services


def test_a_query_past_the_timeout_is_cancelled_and_the_pool_gets_its_connection_back_untimed(
    services: Services,
) -> None:
    timed = TimedPool(services.db, 50)
    with timed.connection() as conn:
        with pytest.raises(QueryCanceled):
            conn.execute("SELECT pg_sleep(30)")
        # The connection is usable again at once (autocommit: no aborted transaction is left).
        assert conn.execute("SELECT 1").fetchone() == (1,)
    with services.db.connection() as conn:
        assert conn.execute("SHOW statement_timeout").fetchone() == ("0",)


def test_the_setting_applies_to_the_api_and_zero_turns_it_off(services: Services) -> None:
    assert services.settings.api_statement_timeout_ms == 10_000
    timed = api_pool(services)
    with timed.connection() as conn:
        assert conn.execute("SHOW statement_timeout").fetchone() == ("10s",)
    use_settings(services, api_statement_timeout_ms=0)
    assert api_pool(current_services()) is services.db


def test_a_request_whose_query_outlasts_the_timeout_is_a_503_naming_the_reason(
    api: Api, services: Services, db: Any,
) -> None:
    use_settings(services, allow_private_targets=False, api_statement_timeout_ms=500)
    job = api.create()
    # Another session holds the job's row (as a slow writer would): the PATCH waits on it until cancelled.
    with db.transaction():
        db.execute("SELECT 1 FROM jobs WHERE id = %s FOR UPDATE", (job["id"],))
        reply = api.call("PATCH", f"/jobs/{job['id']}", {"name": "renamed"})
    assert reply.status == 503, reply.body
    assert reply.body["error"]["code"] == "statement_timeout" and "statement timeout" in reply.body["error"]["message"]
    # Nothing half-done, and the next request goes through.
    assert api.call("GET", f"/jobs/{job['id']}").body["name"] == job["name"]
    assert api.call("PATCH", f"/jobs/{job['id']}", {"name": "renamed"}).status == 200
