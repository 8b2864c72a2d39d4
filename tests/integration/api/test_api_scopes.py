"""Scoped API keys through the real API handler: every documented route declares the scope it needs and
answers 403 naming it to a key without it; keys are created within the creating key's scopes."""
from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from tests.integration.api_client import Api, job_body, use_settings
from tickwork.api.app import openapi_json
from tickwork.store.tenants import create_api_key, create_tenant
from tickwork.tenant.access import ALL_SCOPES, JOBS_READ, JOBS_WRITE, KEYS_ADMIN, RUNS_WRITE, SECRETS_WRITE
from tickwork.wiring import Services

# The only operations any live key may call (GET /health needs no key at all).
NO_SCOPE = {("GET", "/health"), ("GET", "/api-keys/current"),
            ("POST", "/callbacks/{execution_id}/{attempt}/{token}")}  # its token is the credential
# A valid body for each operation that takes one: the body is validated before the key's scopes are checked
# (powertools validates before it resolves the route's dependencies), as before the key itself is.
BODIES: dict[tuple[str, str], Any] = {
    ("POST", "/jobs"): job_body(), ("PATCH", "/jobs/{job_id}"): {"name": "renamed"},
    ("PUT", "/secrets/{name}"): {"value": "v"}, ("POST", "/schedules/preview"): {"schedule": "every minute"},
    ("POST", "/api-keys"): {"name": "made"},
    ("PUT", "/jobs/by-key/{key}"): job_body(), ("POST", "/jobs/by-key/{key}/plan"): job_body(),
    ("PUT", "/calendars/{name}"): {"dates": ["2026-12-25"]},
    ("POST", "/jobs/{job_id}/replay"): {"since": "2026-01-01T00:00:00Z", "until": "2026-01-02T00:00:00Z"},
}


def operations() -> list[tuple[str, str, dict[str, Any]]]:
    paths = json.loads(openapi_json())["paths"]
    return [(method.upper(), path, op) for path, item in paths.items() for method, op in item.items()]


def declared_scope(operation: dict[str, Any]) -> str | None:
    requirement = operation["security"]
    assert len(requirement) == 1, requirement
    names = next(iter(requirement[0].values()), [])
    assert len(names) <= 1, names
    return names[0] if names else None


def key_with(api: Api, *scopes: str) -> str:
    reply = api.call("POST", "/api-keys", {"name": "-".join(scopes) or "none", "scopes": list(scopes)})
    assert reply.status == 201, reply.body
    assert reply.body["scopes"] == [s for s in ALL_SCOPES if s in scopes]
    return str(reply.body["key"])


def concrete(path: str) -> str:
    return path.replace("{name}", "SOME_SECRET").replace("{key_id}", str(uuid.uuid4())).replace(
        "{job_id}", str(uuid.uuid4())).replace("{execution_id}", str(uuid.uuid4())).replace("{key}", "some-key")


def test_every_operation_declares_one_scope_or_is_one_of_the_few_that_need_none() -> None:
    for method, path, operation in operations():
        scope = declared_scope(operation)
        assert (scope is None) == ((method, path) in NO_SCOPE), (method, path)
        assert scope is None or scope in ALL_SCOPES
        assert ("403" in operation["responses"]) == (scope is not None), (method, path)


def test_every_scoped_operation_answers_403_naming_its_scope_to_a_key_without_it(api: Api, services: Services) -> None:
    # Two calls per operation from one tenant: past its request budget, which is not what this tests.
    use_settings(services, allow_private_targets=False, tenant_rate_limit_per_second=1000, tenant_rate_limit_burst=1000)
    without = {scope: key_with(api, *(s for s in ALL_SCOPES if s != scope)) for scope in ALL_SCOPES}
    only = {scope: key_with(api, scope) for scope in ALL_SCOPES}
    for method, path, operation in operations():
        scope = declared_scope(operation)
        if scope is None:
            continue
        body = BODIES.get((method, path))
        refused = api.call(method, concrete(path), body, token=without[scope])
        assert refused.status == 403, (method, path, refused.body)
        assert refused.body["error"]["code"] == "missing_scope"
        assert refused.body["error"]["message"] == f"this API key lacks the scope {scope}"
        allowed = api.call(method, concrete(path), body, token=only[scope])
        assert allowed.status != 403, (method, path, allowed.body)


def test_a_read_only_key_reads_everything_and_changes_nothing(api: Api) -> None:
    job = api.create()
    api.call("PUT", "/secrets/TOKEN", {"value": "v"})
    reader = key_with(api, JOBS_READ)
    for path in ("/jobs", f"/jobs/{job['id']}", f"/jobs/{job['id']}/executions", "/executions", "/stats",
                 f"/jobs/{job['id']}/notifications", "/secrets"):
        assert api.call("GET", path, token=reader).status == 200, path
    for method, path, scope in (("PATCH", f"/jobs/{job['id']}", JOBS_WRITE), ("POST", f"/jobs/{job['id']}/run", RUNS_WRITE),
                                ("DELETE", "/secrets/TOKEN", SECRETS_WRITE), ("GET", "/api-keys", KEYS_ADMIN)):
        reply = api.call(method, path, {"name": "x"} if method == "PATCH" else None, token=reader)
        assert (reply.status, reply.body["error"]["code"]) == (403, "missing_scope")
        assert scope in reply.body["error"]["message"]
    assert api.call("GET", f"/jobs/{job['id']}").body["name"] == job["name"]
    assert [s["name"] for s in api.call("GET", "/secrets").body["items"]] == ["TOKEN"]


def test_a_run_key_runs_jobs_but_cannot_edit_them(api: Api) -> None:
    job = api.create()
    runner = key_with(api, RUNS_WRITE)
    assert api.call("POST", f"/jobs/{job['id']}/run", token=runner).status == 202
    assert api.call("POST", f"/jobs/{job['id']}/pause", token=runner).status == 403
    assert api.call("POST", "/jobs", job_body(), token=runner).status == 403


def test_the_current_key_tells_its_scopes_to_any_key(api: Api) -> None:
    reader = key_with(api, JOBS_READ)
    reply = api.call("GET", "/api-keys/current", token=reader)
    assert reply.status == 200
    assert reply.body["scopes"] == [JOBS_READ] and reply.body["tenant_id"] == api.tenant_id
    assert reply.body["name"] == JOBS_READ and reply.body["prefix"] == reader[:8]
    assert set(reply.body) == {"id", "name", "prefix", "tenant_id", "scopes"}
    full = api.call("GET", "/api-keys/current").body
    assert full["scopes"] == list(ALL_SCOPES) and full["id"] != reply.body["id"]


def test_a_key_made_before_scopes_and_a_new_key_by_default_hold_every_scope(api: Api) -> None:
    created = api.call("POST", "/api-keys", {"name": "default"})
    assert created.status == 201 and created.body["scopes"] == list(ALL_SCOPES)
    listed = {k["id"]: k for k in api.call("GET", "/api-keys").body["items"]}
    assert all(k["scopes"] == list(ALL_SCOPES) for k in listed.values()) and len(listed) == 2


def test_a_key_gives_a_new_key_only_scopes_it_holds(api: Api) -> None:
    admin = key_with(api, KEYS_ADMIN, JOBS_READ)
    wider = api.call("POST", "/api-keys", {"name": "x", "scopes": [JOBS_READ, SECRETS_WRITE]}, token=admin)
    assert wider.status == 403
    assert wider.body["error"] == {"code": "missing_scope", "field": "scopes.1", "message":
                                   "this API key lacks the scope secrets:write, so it cannot give it to a new key"}
    by_default = api.call("POST", "/api-keys", {"name": "x"}, token=admin)
    assert by_default.status == 201 and by_default.body["scopes"] == [JOBS_READ, KEYS_ADMIN]
    narrower = api.call("POST", "/api-keys", {"name": "y", "scopes": [JOBS_READ]}, token=admin)
    assert narrower.status == 201 and narrower.body["scopes"] == [JOBS_READ]


@pytest.mark.parametrize(("scopes", "field"), [
    ([], "scopes"),
    (["jobs:admin"], "scopes.0"),
    ([JOBS_READ, "JOBS:WRITE"], "scopes.1"),
    ([JOBS_READ, 3], "scopes.1"),
    (None, "scopes"),
    ("jobs:read", "scopes"),
])
def test_bad_scopes_are_a_400_naming_the_field(api: Api, scopes: Any, field: str) -> None:
    reply = api.call("POST", "/api-keys", {"name": "x", "scopes": scopes})
    assert (reply.status, reply.body["error"]["field"]) == (400, field), reply.body
    assert len(api.call("GET", "/api-keys").body["items"]) == 1


def test_another_tenants_keys_are_neither_listed_nor_deletable_whatever_the_scope(api: Api, db: Any) -> None:
    other_tenant = create_tenant(db, "tenant-b")
    other = Api(api.handler, create_api_key(db, other_tenant), other_tenant, api.index)
    mine = api.call("POST", "/api-keys", {"name": "mine", "scopes": [JOBS_READ]}).body
    assert mine["id"] not in {k["id"] for k in other.call("GET", "/api-keys").body["items"]}
    assert other.call("DELETE", f"/api-keys/{mine['id']}").status == 404
    assert other.call("GET", "/api-keys/current").body["tenant_id"] == other_tenant
    assert api.call("GET", "/jobs", token=mine["key"]).status == 200


def test_a_keys_admin_key_deletes_only_keys_whose_every_scope_it_holds(api: Api, db: Any) -> None:
    """keys:admin alone once deleted the tenant's wider keys (its deploy key, its full key): a key that
    cannot make another key cannot remove it either."""
    admin = key_with(api, KEYS_ADMIN, JOBS_READ)
    deploy = api.call("POST", "/api-keys", {"name": "deploy", "scopes": [JOBS_READ, JOBS_WRITE]}).body
    reader = api.call("POST", "/api-keys", {"name": "reader", "scopes": [JOBS_READ]}).body
    refused = api.call("DELETE", f"/api-keys/{deploy['id']}", token=admin)
    assert refused.status == 403
    assert refused.body["error"] == {"code": "missing_scope", "field": None, "message": (
        f"this API key lacks the scope jobs:write that API key {deploy['id']} holds, so it cannot delete it")}
    full = next(k for k in api.call("GET", "/api-keys").body["items"] if k["scopes"] == list(ALL_SCOPES))
    assert api.call("DELETE", f"/api-keys/{full['id']}", token=admin).status == 403
    assert api.call("GET", "/jobs", token=deploy["key"]).status == 200 and api.call("GET", "/jobs").status == 200
    # A key it could have made is its to delete, as is itself.
    assert api.call("DELETE", f"/api-keys/{reader['id']}", token=admin).status == 204
    assert api.call("GET", "/jobs", token=reader["key"]).status == 401
    assert api.call("DELETE", f"/api-keys/{_key_id(api, admin)}", token=admin).status == 204


def _key_id(api: Api, token: str) -> str:
    return str(api.call("GET", "/api-keys/current", token=token).body["id"])
