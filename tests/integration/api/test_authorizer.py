"""The HTTP API's Lambda request authorizer, served by the API function (events/api_authorizer.json),
against the real Postgres: a known, unrevoked key is allowed; anything else is not."""
from __future__ import annotations

from typing import Any, Callable

import pytest

from tests.conftest import load_event
from tickwork.store.tenants import create_api_key, create_tenant
from tickwork.wiring import Services

Handler = Callable[[str], Callable[[dict[str, Any], Any], Any]]
EVENT_TOKEN = "tw_example_key_do_not_use_in_production"


@pytest.fixture
def tenant_id(db: Any) -> str:
    tenant = create_tenant(db, "acme")
    create_api_key(db, tenant, EVENT_TOKEN)
    return tenant


def _authorize(handler: Handler, authorization: str | None) -> dict[str, Any]:
    event = load_event("api_authorizer.json")
    if authorization is None:
        del event["headers"]["authorization"]
    else:
        event["headers"]["authorization"] = authorization
    return handler("api")(event, None)


def test_a_known_key_is_authorized_with_its_tenant(services: Services, tenant_id: str, handler: Handler) -> None:
    assert handler("api")(load_event("api_authorizer.json"), None) == {
        "isAuthorized": True, "context": {"tenant_id": tenant_id}}


@pytest.mark.parametrize("authorization", [
    None, "", "Bearer", "Basic dXNlcjpwYXNz", "Bearer tw_unknown_key", f"Token {EVENT_TOKEN}",
])
def test_anything_else_is_refused(services: Services, tenant_id: str, handler: Handler,
                                  authorization: str | None) -> None:
    assert _authorize(handler, authorization) == {"isAuthorized": False}


def test_a_revoked_key_is_refused(services: Services, db: Any, tenant_id: str, handler: Handler) -> None:
    db.execute("UPDATE api_keys SET revoked_at = now() WHERE tenant_id = %s", (tenant_id,))
    assert _authorize(handler, f"Bearer {EVENT_TOKEN}") == {"isAuthorized": False}


def test_an_api_request_is_not_taken_for_an_authorizer_call(services: Services, tenant_id: str,
                                                            handler: Handler) -> None:
    reply = handler("api")(load_event("api_list_jobs.json"), None)
    assert reply["statusCode"] == 200 and "isAuthorized" not in reply
