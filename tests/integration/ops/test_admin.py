"""The bootstrap operations: a direct Lambda invoke of the API function (IAM decides who may) creates a
tenant and its first key, or issues a key to an existing tenant, driven by events/api_admin_create_tenant.json
and events/api_admin_create_api_key.json against the real Postgres."""
from __future__ import annotations

import json
import threading
from datetime import datetime, timezone
from typing import Any, Callable

import pytest

from tests.conftest import load_event
from tests.integration.api_client import Api
from tickwork.scope import Scope
from tickwork.store.filters import AuditFilter
from tickwork.store.tenants import tenant_for_key
from tickwork.tenant import apikeys, audit
from tickwork.wiring import Services

Handler = Callable[[str], Callable[[dict[str, Any], Any], Any]]
T0 = datetime(2031, 5, 6, 7, 8, 9, tzinfo=timezone.utc)


def _tenants(db: Any, name: str) -> list[str]:
    return [str(row[0]) for row in db.execute("SELECT id FROM tenants WHERE name = %s", (name,))]


def _list_jobs(handler: Handler, token: str) -> dict[str, Any]:
    event = load_event("api_list_jobs.json")
    event["headers"]["authorization"] = f"Bearer {token}"
    return handler("api")(event, None)


def test_create_tenant_returns_a_working_key_once(services: Services, db: Any, handler: Handler,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    result = handler("api")(load_event("api_admin_create_tenant.json"), None)
    assert result["name"] == "acme" and _tenants(db, "acme") == [result["tenant_id"]]
    token = result["api_key"]
    assert tenant_for_key(db, token) == result["tenant_id"]
    assert _list_jobs(handler, token)["statusCode"] == 200
    # Only its digest is stored, and the clear key is in no log line.
    assert db.execute("SELECT count(*) FROM api_keys WHERE key_hash::text LIKE %s", (f"%{token}%",)).fetchone() == (0,)
    out = capsys.readouterr()
    assert token not in out.out + out.err


def test_a_second_tenant_of_the_same_name_is_refused(services: Services, db: Any, handler: Handler) -> None:
    first = handler("api")(load_event("api_admin_create_tenant.json"), None)
    second = handler("api")(load_event("api_admin_create_tenant.json"), None)
    assert second["statusCode"] == 409 and second["error"]["field"] == "name"
    assert "api_key" not in second and _tenants(db, "acme") == [first["tenant_id"]]


@pytest.mark.parametrize("event,field", [
    ({"admin": "create-tenant"}, "name"),
    ({"admin": "create-tenant", "name": "   "}, "name"),
    ({"admin": "create-tenant", "name": 7}, "name"),
    ({"admin": "create-tenant", "name": "x" * 201}, "name"),
    ({"admin": "drop-everything"}, "admin"),
])
def test_bad_input_is_a_400_naming_the_field(services: Services, db: Any, handler: Handler,
                                             event: dict[str, Any], field: str) -> None:
    result = handler("api")(event, None)
    assert result["statusCode"] == 400
    assert result["error"]["code"] == "invalid_request" and result["error"]["field"] == field
    assert result["error"]["message"]
    assert db.execute("SELECT count(*) FROM tenants").fetchone() == (0,)


def test_an_http_request_never_reaches_the_admin_operation(services: Services, db: Any, handler: Handler) -> None:
    # A body is a string inside the API Gateway event: it cannot become the event's "admin" key, and
    # an event with "admin" beside a requestContext is still routed as HTTP.
    event = load_event("api_create_job.json")
    event["body"] = json.dumps({"admin": "create-tenant", "name": "mallory"})
    event["admin"] = "create-tenant"
    event["name"] = "mallory"
    event["headers"]["authorization"] = "Bearer tw_not_a_key"
    result = handler("api")(event, None)
    # Answered by the HTTP API (a JSON string body; the admin path returns a dict without one).
    assert result["statusCode"] in (400, 401) and isinstance(result["body"], str)
    assert "api_key" not in result and _tenants(db, "mallory") == []


def test_a_name_differing_only_in_case_is_the_same_tenant(services: Services, db: Any, handler: Handler) -> None:
    first = handler("api")(load_event("api_admin_create_tenant.json"), None)
    second = handler("api")({"admin": "create-tenant", "name": "  ACME "}, None)
    assert second["statusCode"] == 409 and second["error"] == {
        "code": "conflict", "field": "name", "message": second["error"]["message"]}
    assert "without case" in second["error"]["message"]
    assert db.execute("SELECT id::text FROM tenants").fetchall() == [(first["tenant_id"],)]


def test_two_concurrent_create_tenant_calls_one_wins(services: Services, db: Any, handler: Handler,
                                                     database_url: str) -> None:
    """Both calls pass the name check before either inserts (a lock held on the table stops both inserts
    until both are waiting on it); the unique index then lets exactly one through."""
    import psycopg

    api = handler("api")
    results: list[dict[str, Any]] = []
    with psycopg.connect(database_url) as blocker:
        blocker.execute("LOCK TABLE tenants IN SHARE ROW EXCLUSIVE MODE")  # SELECTs pass, INSERTs wait
        threads = [threading.Thread(target=lambda: results.append(api(load_event("api_admin_create_tenant.json"),
                                                                      None))) for _ in range(2)]
        for thread in threads:
            thread.start()
        _wait_for_lock_waiters(database_url, 2, threads)
        blocker.rollback()  # releases the lock: both inserts go on
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)
    won = [r for r in results if "api_key" in r]
    lost = [r for r in results if "api_key" not in r]
    assert len(won) == 1 and len(lost) == 1, results
    assert lost[0]["statusCode"] == 409 and lost[0]["error"]["field"] == "name"
    assert _tenants(db, "acme") == [won[0]["tenant_id"]]
    assert tenant_for_key(db, won[0]["api_key"]) == won[0]["tenant_id"]
    assert db.execute("SELECT count(*) FROM api_keys").fetchone() == (1,)


def _wait_for_lock_waiters(database_url: str, count: int, threads: list[threading.Thread]) -> None:
    """Returns once `count` sessions wait on a lock in this test's schema (a handshake, no sleep length
    to guess); fails if a thread ended first (it did not wait: the race was not set up)."""
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as watcher:
        while True:
            (waiting,) = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND query LIKE 'INSERT INTO tenants%%' AND datname = current_database()").fetchone()
            if waiting >= count:
                return
            assert all(thread.is_alive() for thread in threads), "a call finished without waiting on the lock"
            watcher.execute("SELECT pg_sleep(0.01)")


def test_the_migration_renames_older_repeats_so_the_index_builds(db: Any) -> None:
    """A database from before 0004 may hold repeated names: the oldest keeps its name, the others get
    their id appended, and the unique index is built."""
    from tickwork.store.migrate import migrate

    db.execute("DROP INDEX tenants_name_unique")
    db.execute("DELETE FROM schema_migrations WHERE version = 4")
    ids = ["00000000-0000-0000-0000-00000000000" + str(n) for n in (1, 2, 3)]
    for n, (tenant_id, name) in enumerate(zip(ids, ["acme", "ACME", "acme"])):
        db.execute("INSERT INTO tenants (id, name, created_at) VALUES (%s, %s, %s)",
                   (tenant_id, name, f"2026-01-0{n + 1}T00:00:00Z"))
    db.execute("INSERT INTO tenants (id, name) VALUES (%s, 'other')", ("00000000-0000-0000-0000-000000000009",))
    assert migrate(db) == ["0004_tenant_names.sql"]
    names = dict(db.execute("SELECT id::text, name FROM tenants").fetchall())
    assert names == {ids[0]: "acme", ids[1]: f"ACME ({ids[1]})", ids[2]: f"acme ({ids[2]})",
                     "00000000-0000-0000-0000-000000000009": "other"}
    with pytest.raises(Exception, match="tenants_name_unique"):
        db.execute("INSERT INTO tenants (id, name) VALUES (gen_random_uuid(), 'Acme')")


def _issue(handler: Handler, **fields: Any) -> dict[str, Any]:
    return handler("api")({**load_event("api_admin_create_api_key.json"), **fields}, None)


def test_create_api_key_issues_a_key_of_the_named_scopes_to_an_existing_tenant(
    services: Services, db: Any, handler: Handler, capsys: pytest.CaptureFixture[str],
) -> None:
    """What an operator does for a tenant whose keys:admin keys are gone, or when no key it has left holds
    the scopes a new one needs: the API never makes a key wider than the key asking."""
    tenant = handler("api")(load_event("api_admin_create_tenant.json"), None)
    issued = _issue(handler)
    assert set(issued) == {"tenant_id", "id", "name", "prefix", "scopes", "api_key", "note"}
    assert (issued["tenant_id"], issued["name"], issued["scopes"]) == (tenant["tenant_id"], "deploy",
                                                                       ["jobs:read", "jobs:write"])
    token = issued["api_key"]
    assert tenant_for_key(db, token) == tenant["tenant_id"] and issued["prefix"] == token[:8]
    assert _list_jobs(handler, token)["statusCode"] == 200
    refused = Api(handler("api"), token, issued["tenant_id"], services.index).call("GET", "/api-keys")
    assert refused.status == 403  # no keys:admin: it was not asked for
    by_id = _issue(handler, tenant=tenant["tenant_id"].upper(), name="reader", scopes=["jobs:read"])
    assert (by_id["tenant_id"], by_id["scopes"]) == (tenant["tenant_id"], ["jobs:read"])
    scope = Scope(services.db, services.index, services.settings, tenant["tenant_id"], T0, services.keyring)
    entries = audit.list_events(scope, AuditFilter(), 10, None).items
    assert {(e.action, e.target, e.key_name) for e in entries} == {
        ("api_key.created", issued["id"], "operator"), ("api_key.created", by_id["id"], "operator")}
    out = capsys.readouterr()
    assert token not in out.out + out.err


@pytest.mark.parametrize("fields, status, field", [
    ({"tenant": "nobody"}, 404, "tenant"),
    ({"tenant": None}, 400, "tenant"),
    ({"name": "  "}, 400, "name"),
    ({"name": "x" * 201}, 400, "name"),
    ({"scopes": None}, 400, "scopes"),
    ({"scopes": []}, 400, "scopes"),
    ({"scopes": "jobs:read"}, 400, "scopes"),
    ({"scopes": ["jobs:read", "jobs:admin"]}, 400, "scopes.1"),
    ({"quota": 3}, 400, "quota"),
])
def test_create_api_key_refuses_bad_input_naming_the_field_and_issues_nothing(
    services: Services, db: Any, handler: Handler, fields: dict[str, Any], status: int, field: str,
) -> None:
    handler("api")(load_event("api_admin_create_tenant.json"), None)
    refused = _issue(handler, **fields)
    assert (refused["statusCode"], refused["error"]["field"]) == (status, field), refused
    assert "api_key" not in refused and db.execute("SELECT count(*) FROM api_keys").fetchone() == (1,)


def test_create_api_key_keeps_to_the_tenants_key_quota(services: Services, db: Any, handler: Handler,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(apikeys, "MAX_KEYS", 2)
    handler("api")(load_event("api_admin_create_tenant.json"), None)
    assert "api_key" in _issue(handler)
    full = _issue(handler)
    assert (full["statusCode"], full["error"]["code"], full["error"]["field"]) == (403, "quota_exceeded",
                                                                                  "max_api_keys")
