"""The bootstrap operation: a direct Lambda invoke of the API function (IAM decides who may) creates a
tenant and its first key, driven by events/api_admin_create_tenant.json against the real Postgres."""
from __future__ import annotations

import json
from typing import Any, Callable

import pytest

from tests.conftest import load_event
from tickwork.store.tenants import tenant_for_key
from tickwork.wiring import Services

Handler = Callable[[str], Callable[[dict[str, Any], Any], Any]]


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
