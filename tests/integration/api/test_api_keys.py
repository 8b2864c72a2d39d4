"""A tenant's own API keys through the real API handler: POST/GET /api-keys, DELETE /api-keys/{id}."""
from __future__ import annotations

import hmac
import threading
from datetime import datetime, timezone
from typing import Any

import pytest

from tests.integration.api_client import EVENT_TOKEN, Api, use_clock
from tests.support import FakeClock
from tickwork.errors import ConflictError
from tickwork.scope import Scope
from tickwork.store.tenants import create_api_key, create_tenant
from tickwork.tenant import apikeys
from tickwork.tenant.access import ALL_SCOPES
from tickwork.wiring import Services

T0 = datetime(2031, 5, 6, 7, 8, 9, tzinfo=timezone.utc)


@pytest.fixture
def other(api: Api, db: Any) -> Api:
    tenant_id = create_tenant(db, "tenant-b")
    return Api(api.handler, create_api_key(db, tenant_id), tenant_id, api.index)


def new_key(api: Api, name: str = "ci") -> dict[str, Any]:
    reply = api.call("POST", "/api-keys", {"name": name})
    assert reply.status == 201, reply.body
    return reply.body


def listed(api: Api) -> dict[str, dict[str, Any]]:
    reply = api.call("GET", "/api-keys")
    assert reply.status == 200, reply.body
    return {item["id"]: item for item in reply.body["items"]}


def test_a_new_key_is_shown_once_and_works_for_the_same_tenant(api: Api, db: Any,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    job = api.create()
    created = new_key(api, " deploy bot ")
    assert set(created) == {"id", "name", "prefix", "key", "scopes", "created_at"}
    assert created["scopes"] == ["jobs:read", "jobs:write", "runs:write", "secrets:write", "keys:admin", "audit:read"]
    assert created["key"].startswith("tw_") and len(created["key"]) > 40
    assert created["prefix"] == created["key"][:8] and created["name"] == "deploy bot"
    mine = api.call("GET", f"/jobs/{job['id']}", token=created["key"])
    assert mine.status == 200 and mine.body["id"] == job["id"]
    # The list never holds the key, and neither does the database or any log line.
    item = listed(api)[created["id"]]
    assert set(item) == {"id", "name", "prefix", "scopes", "created_at", "last_used_at"}
    assert created["key"] not in api.call("GET", "/api-keys").raw
    stored = db.execute("SELECT key_hash, prefix, name FROM api_keys WHERE id = %s", (created["id"],)).fetchone()
    assert created["key"].encode() not in bytes(stored[0]) and stored[1:] == (created["prefix"], "deploy bot")
    out = capsys.readouterr()
    assert created["key"] not in out.out + out.err


def test_last_used_at_is_written_at_most_once_a_minute(api: Api, services: Services, db: Any) -> None:
    clock = FakeClock(T0)
    use_clock(clock.time)
    key = new_key(api)
    assert listed(api)[key["id"]]["last_used_at"] is None
    assert api.call("GET", "/jobs", token=key["key"]).status == 200
    assert listed(api)[key["id"]]["last_used_at"] == "2031-05-06T07:08:09.000Z"
    clock.sleep(59)
    assert api.call("GET", "/jobs", token=key["key"]).status == 200
    assert listed(api)[key["id"]]["last_used_at"] == "2031-05-06T07:08:09.000Z"
    clock.sleep(1)
    assert api.call("GET", "/jobs", token=key["key"]).status == 200
    assert listed(api)[key["id"]]["last_used_at"] == "2031-05-06T07:09:09.000Z"


def test_a_deleted_key_stops_working_at_once(api: Api) -> None:
    key = new_key(api)
    assert api.call("GET", "/jobs", token=key["key"]).status == 200
    deleted = api.call("DELETE", f"/api-keys/{key['id']}")
    assert deleted.status == 204 and deleted.raw == ""
    refused = api.call("GET", "/jobs", token=key["key"])
    assert refused.status == 401 and refused.body["error"]["code"] == "unauthorized"
    assert key["id"] not in listed(api)
    again = api.call("DELETE", f"/api-keys/{key['id']}")
    assert again.status == 404 and again.body["error"]["code"] == "not_found"


def test_a_key_may_delete_itself_but_not_the_tenants_last_key(api: Api) -> None:
    key = new_key(api)
    assert api.call("DELETE", f"/api-keys/{key['id']}", token=key["key"]).status == 204
    (last,) = listed(api)
    refused = api.call("DELETE", f"/api-keys/{last}")
    assert refused.status == 409 and refused.body["error"]["code"] == "conflict"
    assert "last" in refused.body["error"]["message"]
    assert api.call("GET", "/jobs").status == 200


def test_two_concurrent_deletes_of_the_last_two_keys_leave_one(api: Api, services: Services, db: Any) -> None:
    """Each delete runs in its own thread on its own connection (the handler lets requests take turns, as
    one Lambda environment does; two environments do not): the tenant row lock decides."""
    (first,) = listed(api)
    tokens = {first: api.token}
    for attempt in range(5):
        spare = new_key(api, f"spare {attempt}")
        tokens[spare["id"]] = spare["key"]
        keys = list(listed(api))
        assert len(keys) == 2
        start, outcomes = threading.Barrier(2), []

        def delete(key_id: str) -> None:
            scope = Scope(services.db, api.index, services.settings, api.tenant_id, T0, services.keyring,
                          frozenset(ALL_SCOPES))  # as the full key asking: it may delete either key
            start.wait(timeout=10)
            try:
                apikeys.delete_key(scope, key_id)
                outcomes.append("deleted")
            except ConflictError:
                outcomes.append("conflict")

        threads = [threading.Thread(target=delete, args=(key_id,)) for key_id in keys[:2]]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert sorted(outcomes) == ["conflict", "deleted"]
        live = db.execute("SELECT count(*) FROM api_keys WHERE tenant_id = %s AND revoked_at IS NULL",
                          (api.tenant_id,)).fetchone()[0]
        assert live == 1
        survivor = next(k for k in keys if _works(api, tokens[k]))
        api = Api(api.handler, tokens[survivor], api.tenant_id, api.index)
        assert list(listed(api)) == [survivor]


def _works(api: Api, token: str) -> bool:
    return api.call("GET", "/api-keys", token=token).status == 200


def test_another_tenant_can_neither_see_nor_delete_a_key(api: Api, other: Api) -> None:
    key = new_key(api)
    assert key["id"] not in listed(other) and len(listed(other)) == 1
    refused = other.call("DELETE", f"/api-keys/{key['id']}")
    assert refused.status == 404 and refused.body["error"]["code"] == "not_found"
    assert api.call("GET", "/jobs", token=key["key"]).status == 200
    assert len(listed(api)) == 2 and not set(listed(api)) & set(listed(other))


@pytest.mark.parametrize("body,field", [
    ({}, "name"),
    ({"name": "   "}, "name"),
    ({"name": "x" * 201}, "name"),
    ({"name": 7}, "name"),
    ({"name": "ci", "scope": ["jobs:read"]}, "scope"),
])
def test_bad_key_bodies_are_a_400_naming_the_field(api: Api, body: dict[str, Any], field: str) -> None:
    reply = api.call("POST", "/api-keys", body)
    assert reply.status == 400, reply.body
    assert reply.body["error"]["code"] == "invalid_request" and reply.body["error"]["field"] == field
    assert len(listed(api)) == 1


@pytest.mark.parametrize("key_id", ["nope", "00000000-0000-0000-0000-000000000000"])
def test_deleting_an_unknown_key_is_a_404(api: Api, key_id: str) -> None:
    assert api.call("DELETE", f"/api-keys/{key_id}").status == 404


def test_a_tenant_has_at_most_max_keys(api: Api, services: Services, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(apikeys, "MAX_KEYS", 3)
    new_key(api, "two")
    new_key(api, "three")
    refused = api.call("POST", "/api-keys", {"name": "four"})
    assert refused.status == 403 and refused.body["error"] == {
        "code": "quota_exceeded", "field": "max_api_keys", "message": refused.body["error"]["message"]}
    assert "3" in refused.body["error"]["message"] and len(listed(api)) == 3


def test_the_event_token_still_authenticates(api: Api) -> None:
    assert api.call("GET", "/api-keys", token=EVENT_TOKEN).status == 200
    assert api.call("GET", "/api-keys", token=None).status == 401
    assert api.call("GET", "/api-keys", token="tw_unknown").status == 401


def test_a_found_key_is_still_compared_in_constant_time(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """The row is found by digest, and the digests are then compared with hmac.compare_digest: when that
    comparison says no, the key is refused (here forced, to show the comparison decides)."""
    compared: list[tuple[bytes, bytes]] = []

    def refuse(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return False

    assert api.call("GET", "/api-keys", token=EVENT_TOKEN).status == 200
    monkeypatch.setattr(hmac, "compare_digest", refuse)
    assert api.call("GET", "/api-keys", token=EVENT_TOKEN).status == 401
    assert compared and all(len(a) == len(b) == 32 for a, b in compared)
