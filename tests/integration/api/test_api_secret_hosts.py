"""A secret's allowed_hosts through the real API handler: set, kept and cleared by PUT /secrets/{name},
shown in the list, validated naming the field, and enforced on every job that would send the secret."""
from __future__ import annotations

from typing import Any

import pytest

from tests.integration.api_client import Api, job_body
from tickwork.store.tenants import create_api_key, create_tenant

VALUE = "hosts-canary-5c1e9b"
BEARER = {"Authorization": "Bearer ${secrets.TOKEN}"}


@pytest.fixture
def other(api: Api, db: Any) -> Api:
    tenant_id = create_tenant(db, "tenant-b")
    return Api(api.handler, create_api_key(db, tenant_id), tenant_id, api.index)


def put(api: Api, name: str = "TOKEN", **fields: Any) -> dict[str, Any]:
    reply = api.call("PUT", f"/secrets/{name}", {"value": VALUE, **fields})
    assert reply.status in (200, 201), reply.body
    return reply.body


def test_allowed_hosts_are_set_kept_on_replace_cleared_by_null_and_listed(api: Api) -> None:
    created = put(api, allowed_hosts=["API.example.com", "*.hooks.example.com"])
    assert created["allowed_hosts"] == ["api.example.com", "*.hooks.example.com"]
    assert put(api)["allowed_hosts"] == ["api.example.com", "*.hooks.example.com"]  # a new value, same hosts
    assert api.call("GET", "/secrets").body["items"][0]["allowed_hosts"] == ["api.example.com", "*.hooks.example.com"]
    assert put(api, allowed_hosts=None)["allowed_hosts"] is None
    assert put(api, name="FREE")["allowed_hosts"] is None
    assert {s["name"]: s["allowed_hosts"] for s in api.call("GET", "/secrets").body["items"]} == {
        "TOKEN": None, "FREE": None}


@pytest.mark.parametrize(("hosts", "field"), [
    ([], "allowed_hosts"),
    (["h.example.com"] * 21, "allowed_hosts"),
    (["api.example.com", "https://x.example.com/path"], "allowed_hosts.1"),
    (["ftp://x.example.com"], "allowed_hosts.0"),
    (["*"], "allowed_hosts.0"),
    ([7], "allowed_hosts.0"),
    ("api.example.com", "allowed_hosts"),
])
def test_bad_allowed_hosts_are_a_400_naming_the_field_and_change_nothing(api: Api, hosts: Any, field: str) -> None:
    put(api, allowed_hosts=["api.example.com"])
    reply = api.call("PUT", "/secrets/TOKEN", {"value": "other", "allowed_hosts": hosts})
    assert (reply.status, reply.body["error"]["field"]) == (400, field), reply.body
    assert api.call("GET", "/secrets").body["items"][0]["allowed_hosts"] == ["api.example.com"]


@pytest.mark.parametrize(("request_fields", "field"), [
    ({"url": "https://example.com/hook", "headers": BEARER}, "request.headers.Authorization"),
    ({"url": "https://example.com/hook?token=${secrets.TOKEN}"}, "request.url"),
    ({"url": "https://example.com/hook", "body": '{"t": "${secrets.TOKEN}"}'}, "request.body"),
    ({"url": "https://a.b.example.com/hook", "headers": BEARER}, "request.headers.Authorization"),
    ({"url": "https://${secrets.FREE}/hook", "headers": BEARER}, "request.headers.Authorization"),
])
def test_a_job_sending_a_secret_to_a_host_it_does_not_allow_is_a_400_naming_the_field(
    api: Api, request_fields: dict[str, Any], field: str,
) -> None:
    put(api, allowed_hosts=["api.example.com", "*.example.com"])
    put(api, name="FREE")
    reply = api.call("POST", "/jobs", job_body(request=request_fields))
    if request_fields["url"].startswith("https://a.b."):
        assert reply.status == 400  # one label under the wildcard, not two
    assert (reply.status, reply.body["error"]["field"]) == (400, field), reply.body
    assert reply.body["error"]["code"] == "invalid_request" and "secret TOKEN" in reply.body["error"]["message"]
    assert api.call("GET", "/jobs").body["items"] == []


def test_allowed_hosts_and_wildcards_accept_the_job(api: Api) -> None:
    put(api, allowed_hosts=["example.com", "*.example.net"])
    assert api.call("POST", "/jobs", job_body(request={"headers": BEARER})).status == 201
    assert api.call("POST", "/jobs", job_body(request={"url": "https://hooks.EXAMPLE.net/x", "headers": BEARER})).status == 201


def test_a_secret_bound_to_a_host_goes_there_over_https_on_its_default_port_only(api: Api, db: Any) -> None:
    """A bare host, as every binding was written before schemes and ports existed, means https on 443: the secret
    does not follow its host to http, nor to another port, at save (POST, PATCH) as at send."""
    put(api, allowed_hosts=["api.example.com"])
    for url in ("http://api.example.com/hook", "https://api.example.com:8443/hook", "http://api.example.com:443/"):
        refused = api.call("POST", "/jobs", job_body(request={"url": url, "headers": BEARER}))
        assert (refused.status, refused.body["error"]["field"]) == (400, "request.headers.Authorization"), url
    job = api.create(request={"url": "https://api.example.com/hook", "headers": BEARER})
    downgraded = api.call("PATCH", f"/jobs/{job['id']}", {"request": {"url": "http://api.example.com/hook"}})
    assert (downgraded.status, downgraded.body["error"]["field"]) == (400, "request.headers.Authorization")

    # A scheme or a port is bound when the entry names it; https on 443 is shown bare, as it always was.
    bound = put(api, allowed_hosts=["https://api.example.com", "http://plain.example.com:8080"])
    assert bound["allowed_hosts"] == ["api.example.com", "http://plain.example.com:8080"]
    assert api.call("POST", "/jobs", job_body(request={"url": "http://plain.example.com:8080/x",
                                                       "headers": BEARER})).status == 201
    for url in ("https://plain.example.com:8080/x", "http://plain.example.com/x", "http://api.example.com/x"):
        refused = api.call("POST", "/jobs", job_body(request={"url": url, "headers": BEARER}))
        assert refused.status == 400, url
    # An older release reading the row sees the hosts alone, as it always did.
    assert db.execute("SELECT allowed_hosts FROM secrets WHERE tenant_id = %s AND name = 'TOKEN'",
                      (api.tenant_id,)).fetchone()[0] == ["api.example.com", "plain.example.com"]


def test_patching_the_url_of_a_job_whose_sealed_header_holds_the_secret_is_a_400(api: Api) -> None:
    """The attack: a key that may edit jobs points one at its own host, keeping its sealed Authorization."""
    put(api, allowed_hosts=["example.com"])
    job = api.create(request={"headers": BEARER})
    assert job["request"]["headers"]["Authorization"] == "***"
    moved = api.call("PATCH", f"/jobs/{job['id']}", {"request": {"url": "https://attacker.example.org/"}})
    assert (moved.status, moved.body["error"]["field"]) == (400, "request.headers.Authorization"), moved.body
    assert api.call("GET", f"/jobs/{job['id']}").body["request"]["url"] == job["request"]["url"]
    renamed = api.call("PATCH", f"/jobs/{job['id']}", {"name": "still-fine"})
    assert renamed.status == 200


@pytest.mark.parametrize("sent_back", ["***", BEARER["Authorization"]])
def test_a_put_by_key_keeping_the_sealed_header_that_holds_the_secret_checks_it_for_the_new_host(
    api: Api, sent_back: str,
) -> None:
    """The attack of the PATCH above through PUT /jobs/by-key: the sealed Authorization is kept whether it is sent
    back as read (***) or as written (then the PUT opens it to compare, and the check takes it from there)."""
    put(api, allowed_hosts=["example.com"])
    assert api.call("PUT", "/jobs/by-key/report", job_body(request={"headers": BEARER})).status == 201
    moved = job_body(request={"url": "https://attacker.example.org/", "headers": {"Authorization": sent_back}})
    for path in ("/jobs/by-key/report/plan", "/jobs/by-key/report"):
        refused = api.call("POST" if path.endswith("/plan") else "PUT", path, moved)
        assert (refused.status, refused.body["error"]["field"]) == (400, "request.headers.Authorization"), refused.body
    assert api.call("GET", "/jobs/by-key/report").body["request"]["url"] == job_body()["request"]["url"]
    kept = job_body(request={"headers": {"Authorization": sent_back}})
    assert api.call("POST", "/jobs/by-key/report/plan", kept).body["action"] == "unchanged"


def test_another_tenants_restrictions_and_secrets_are_its_own(api: Api, other: Api) -> None:
    put(api, allowed_hosts=["api.example.com"])
    assert other.call("PUT", "/secrets/TOKEN", {"value": "b-value"}).status == 201
    assert other.call("POST", "/jobs", job_body(request={"headers": BEARER})).status == 201
    assert api.call("POST", "/jobs", job_body(request={"headers": BEARER})).status == 400
    assert other.call("GET", "/secrets").body["items"][0]["allowed_hosts"] is None
    assert other.call("PUT", "/secrets/TOKEN", {"value": "b", "allowed_hosts": ["example.com"]}).status == 200
    assert api.call("GET", "/secrets").body["items"][0]["allowed_hosts"] == ["api.example.com"]
