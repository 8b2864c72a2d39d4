"""The secrets and signing-secret routes: write-only values, validation naming the field, the per-tenant
limit under concurrency, and tenants that cannot see each other's."""
from __future__ import annotations

import threading
from datetime import datetime, timezone
from typing import Any

import pytest

from tests.integration.api_client import Api, job_body
from tickwork.dueindex.index import DueIndex
from tickwork.errors import ConflictError
from tickwork.scope import Scope
from tickwork.store.secrets import PgKeyStore
from tickwork.store.tenants import create_api_key, create_tenant
from tickwork.tenant import secrets as tenant_secrets
from tickwork.wiring import Services

VALUE = "s3cr3t-value-never-shown"


@pytest.fixture
def other(api: Api, db: Any) -> Api:
    tenant_id = create_tenant(db, "tenant-b")
    return Api(api.handler, create_api_key(db, tenant_id), tenant_id, api.index)


def test_put_creates_then_replaces_and_never_shows_the_value(api: Api) -> None:
    created = api.call("PUT", "/secrets/TOKEN", {"value": VALUE})
    replaced = api.call("PUT", "/secrets/TOKEN", {"value": VALUE + "2"})
    listed = api.call("GET", "/secrets")
    assert (created.status, replaced.status, listed.status) == (201, 200, 200)
    assert created.body["name"] == "TOKEN" and set(created.body) == {"name", "allowed_hosts", "created_at", "updated_at"}
    assert replaced.body["created_at"] == created.body["created_at"]
    assert listed.body == {"items": [replaced.body], "next_cursor": None}
    assert all(VALUE not in reply.raw for reply in (created, replaced, listed))


def test_the_list_is_cursor_paged_newest_first(api: Api) -> None:
    for name in ("A", "B", "C"):
        assert api.call("PUT", f"/secrets/{name}", {"value": "x"}).status == 201
    first = api.call("GET", "/secrets", query={"limit": "2"}).body
    second = api.call("GET", "/secrets", query={"limit": "2", "cursor": first["next_cursor"]}).body
    names = [s["name"] for s in first["items"] + second["items"]]
    assert sorted(names) == ["A", "B", "C"] and len(first["items"]) == 2 and second["next_cursor"] is None


def test_delete_answers_204_then_404(api: Api) -> None:
    api.call("PUT", "/secrets/GONE", {"value": "x"})
    assert api.call("DELETE", "/secrets/GONE").status == 204
    assert api.call("DELETE", "/secrets/GONE").status == 404
    assert api.call("GET", "/secrets").body["items"] == []


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/secrets/9LIVES", {"value": "x"}, "name"),
    ("/secrets/has-dash", {"value": "x"}, "name"),
    ("/secrets/" + "A" * 65, {"value": "x"}, "name"),
    ("/secrets/OK", {"value": "é" * 4097}, "value"),  # 8,194 bytes in UTF-8
    ("/secrets/OK", {}, "value"),
    ("/secrets/OK", {"value": 5}, "value"),
    ("/secrets/OK", {"value": "x", "extra": 1}, "extra"),
])
def test_bad_input_is_a_400_naming_the_field(api: Api, path: str, body: dict[str, Any], field: str) -> None:
    reply = api.call("PUT", path, body)
    assert reply.status == 400, reply.body
    assert reply.body["error"]["field"] == field
    assert "é" * 10 not in reply.raw


def test_a_value_of_exactly_8_kib_is_accepted(api: Api) -> None:
    assert api.call("PUT", "/secrets/BIG", {"value": "x" * 8192}).status == 201


def test_a_tenant_has_at_most_100_even_when_created_at_once(api: Api, services: Services) -> None:
    scope = _scope(services, api.tenant_id)
    for i in range(98):
        tenant_secrets.put_secret(scope, f"S{i}", "x")
    outcomes: list[str] = []
    barrier = threading.Barrier(3)

    def create(name: str) -> None:
        barrier.wait()
        try:
            tenant_secrets.put_secret(scope, name, "x")
            outcomes.append("created")
        except ConflictError:
            outcomes.append("refused")

    threads = [threading.Thread(target=create, args=(f"NEW{i}",)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["created", "created", "refused"]
    refused = api.call("PUT", "/secrets/ONE_MORE", {"value": "x"})
    assert (refused.status, refused.body["error"]["field"]) == (409, "name")
    assert api.call("PUT", "/secrets/S0", {"value": "replaced"}).status == 200  # replacing is not adding


def test_another_tenants_secrets_are_not_found_and_not_usable(api: Api, other: Api) -> None:
    other.call("PUT", "/secrets/THEIRS", {"value": VALUE})
    assert api.call("DELETE", "/secrets/THEIRS").status == 404
    assert api.call("GET", "/secrets").body["items"] == []
    job = api.call("POST", "/jobs", job_body(request={"headers": {"X-Key": "${secrets.THEIRS}"}}))
    assert (job.status, job.body["error"]["field"]) == (400, "request.headers.X-Key")
    assert other.call("GET", "/secrets").body["items"][0]["name"] == "THEIRS"


@pytest.mark.parametrize(("request_fields", "field"), [
    ({"headers": {"Authorization": "Bearer ${secrets.MISSING}"}}, "request.headers.Authorization"),
    ({"url": "https://example.com/${secrets.MISSING}"}, "request.url"),
    ({"body": '{"k": "${secrets.MISSING}"}'}, "request.body"),
])
def test_a_job_referencing_a_missing_secret_is_a_400_naming_the_field(
    api: Api, request_fields: dict[str, Any], field: str,
) -> None:
    reply = api.call("POST", "/jobs", job_body(request=request_fields))
    assert reply.status == 400, reply.body
    assert reply.body["error"] == {"code": "invalid_request", "message": "unknown secret MISSING", "field": field}


def test_a_patch_referencing_a_missing_secret_is_a_400_and_an_existing_one_is_fine(api: Api) -> None:
    job = api.create()
    patch = {"request": {"headers": {"Authorization": "Bearer ${secrets.TOKEN}"}}}
    refused = api.call("PATCH", f"/jobs/{job['id']}", patch)
    assert (refused.status, refused.body["error"]["field"]) == (400, "request.headers.Authorization")
    api.call("PUT", "/secrets/TOKEN", {"value": VALUE})
    assert api.call("PATCH", f"/jobs/{job['id']}", patch).status == 200
    created = api.call("POST", "/jobs", job_body(request={"url": "https://example.com/${secrets.TOKEN}"}))
    assert created.status == 201 and created.body["request"]["url"] == "https://example.com/${secrets.TOKEN}"


@pytest.mark.parametrize(("request_fields", "field"), [
    ({"body": "${secrets.TOKEN}" * 129}, "request.body"),  # 129 x 8 KiB, the largest a secret may be: > 1 MiB
    ({"headers": {"Authorization": "${secrets.TOKEN}" * 5}}, "request.headers.Authorization"),
    ({"headers": {f"X-Key-{i}": "${secrets.TOKEN}" for i in range(4)}}, "request.headers"),
])
def test_a_job_that_could_expand_past_a_bound_is_a_400_naming_the_field(
    api: Api, request_fields: dict[str, Any], field: str,
) -> None:
    """#22: counted with every secret at its largest (8 KiB), whatever the tenant's secret holds today."""
    api.call("PUT", "/secrets/TOKEN", {"value": "short"})
    reply = api.call("POST", "/jobs", job_body(request=request_fields))
    assert reply.status == 400, reply.body
    assert reply.body["error"]["field"] == field and "each reference counts as 8192 bytes" in reply.body["error"]["message"]
    job = api.create()
    patched = api.call("PATCH", f"/jobs/{job['id']}", {"request": request_fields})
    assert (patched.status, patched.body["error"]["field"]) == (400, field)


def test_a_patch_keeping_a_sealed_header_is_measured_by_what_it_sends(api: Api) -> None:
    """A sensitive header sent back as *** keeps its sealed value: measured opened, its reference counted."""
    api.call("PUT", "/secrets/TOKEN", {"value": VALUE})
    three = {"Authorization": "${secrets.TOKEN}", "X-A": "${secrets.TOKEN}", "X-B": "${secrets.TOKEN}"}
    job = api.create(request={"headers": three})
    kept = {**three, "Authorization": "***"}
    assert api.call("PATCH", f"/jobs/{job['id']}", {"request": {"headers": kept}}).status == 200
    four = {**kept, "X-C": "${secrets.TOKEN}"}  # the sealed one's reference makes four: over 32 KiB
    refused = api.call("PATCH", f"/jobs/{job['id']}", {"request": {"headers": four}})
    assert (refused.status, refused.body["error"]["field"]) == (400, "request.headers")


def test_the_signing_secret_is_created_once_and_rotation_makes_a_new_one(api: Api, other: Api) -> None:
    first = api.call("GET", "/signing-secret")
    again = api.call("GET", "/signing-secret")
    assert first.status == 200 and first.body == again.body and first.body["secret"].startswith("whsec_")
    rotated = api.call("POST", "/signing-secret/rotate")
    assert rotated.status == 200 and rotated.body["secret"] != first.body["secret"]
    assert api.call("GET", "/signing-secret").body == rotated.body
    assert other.call("GET", "/signing-secret").body["secret"] not in (first.body["secret"], rotated.body["secret"])


def test_the_routes_are_in_the_openapi_document(api: Api) -> None:
    paths = api.call("GET", "/openapi.json").body["paths"]
    assert {"put", "delete"} <= set(paths["/secrets/{name}"]) and "get" in paths["/secrets"]
    assert "get" in paths["/signing-secret"] and "post" in paths["/signing-secret/rotate"]
    assert set(paths["/secrets/{name}"]["put"]["responses"]) >= {"200", "201", "400", "401", "409"}


def _scope(services: Services, tenant_id: str) -> Scope:
    return Scope(services.db, DueIndex(services.redis, services.settings.namespace), services.settings, tenant_id,
                 datetime.now(timezone.utc), services.keyring)




def test_a_data_key_is_never_stored_inside_a_transaction_that_could_roll_it_back(db: Any) -> None:
    """A key cached by the environment but rolled back in Postgres would seal values nobody else can open."""
    with db.transaction():
        with pytest.raises(RuntimeError):
            PgKeyStore(db).add(b"wrapped", "local")
    assert PgKeyStore(db).current() is None
    assert PgKeyStore(db).add(b"wrapped", "local") == 1
