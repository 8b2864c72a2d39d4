"""The audit log through the real API handler: every change made through the API leaves one entry naming the
key (never the token), the request and the client, in the change's own transaction; GET /audit pages them
newest first, narrowed and checked like the other lists, one tenant's never shown to another."""
from __future__ import annotations

import hashlib
import json
import random
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from tests.conftest import load_event
from tests.integration.api_client import Api, Ticking, job_body, use_clock
from tickwork import vocab
from tickwork.scope import Scope
from tickwork.store.tenants import create_api_key, create_tenant
from tickwork.tenant import audit, audit_bounds

START = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
SECRET_VALUE = "audit-canary-7d31f0"
HEADER_VALUE = "audit-header-canary-99ab"
CONTEXT = load_event("api_create_job.json")["requestContext"]


@pytest.fixture
def keyed(api: Api) -> Api:
    """The tenant's API, called with a key named "deployer" (created through the API, by the event's key)."""
    use_clock(Ticking(START))
    reply = api.call("POST", "/api-keys", {"name": "deployer"})
    assert reply.status == 201, reply.body
    return Api(api.handler, reply.body["key"], api.tenant_id, api.index)


@pytest.fixture
def other(api: Api, db: Any) -> Api:
    tenant_id = create_tenant(db, "tenant-b")
    return Api(api.handler, create_api_key(db, tenant_id, name="b-key"), tenant_id, api.index)


def entries(api: Api, **query: str) -> list[dict[str, Any]]:
    reply = api.call("GET", "/audit", query=query)
    assert reply.status == 200, reply.body
    return list(reply.body["items"])


def error_field(reply: Any) -> tuple[int, str | None]:
    return reply.status, (reply.body or {}).get("error", {}).get("field")


def test_every_action_recorded_is_an_action_the_list_is_narrowed_to(keyed: Api, db: Any) -> None:
    """Each action the services record, written as they write it, is read back by GET /audit?action=."""
    scope = Scope(None, keyed.index, None, keyed.tenant_id, START)  # type: ignore[arg-type]
    for action in vocab.AuditAction:
        audit.record(db, scope, action, target=f"target of {action}")
    for action in vocab.AuditAction:
        listed = entries(keyed, action=action.value)
        assert f"target of {action.value}" in [e["target"] for e in listed]
        assert {e["action"] for e in listed} == {action.value}


def test_every_change_to_a_job_is_recorded_with_who_made_it_and_a_no_op_records_nothing(keyed: Api) -> None:
    job = keyed.create(request={"headers": {"Authorization": f"Bearer {HEADER_VALUE}", "X-Team": "a"}})
    path = f"/jobs/{job['id']}"
    assert keyed.call("PATCH", path, {"name": "renamed", "request": {"headers": {
        "Authorization": "Bearer other", "X-Team": "b"}}}).status == 200
    assert keyed.call("PATCH", path, {"name": "renamed"}).status == 200  # changes nothing
    assert keyed.call("POST", path + "/pause").status == 200
    assert keyed.call("POST", path + "/pause").status == 200  # paused already
    assert keyed.call("POST", path + "/resume").status == 200
    run = keyed.call("POST", path + "/run").body
    assert keyed.call("DELETE", path).status == 204

    found = entries(keyed, job_id=job["id"])
    assert [e["action"] for e in found] == ["job.deleted", "job.run", "job.resumed", "job.paused", "job.updated",
                                            "job.created"]
    key_id = keyed.call("GET", "/api-keys/current").body["id"]
    for entry in found:
        assert (entry["key_id"], entry["key_name"]) == (key_id, "deployer")
        assert (entry["request_id"], entry["client_ip"]) == (CONTEXT["requestId"], CONTEXT["http"]["sourceIp"])
        assert entry["job_id"] == job["id"]
    deleted, ran, resumed, paused, updated, created = found
    assert deleted["target"] == "renamed" and deleted["changes"] is None
    assert ran["target"] == run["id"]
    assert paused["changes"] == [{"field": "status", "before": "active", "after": "paused", "digested": []}]
    assert resumed["changes"] == [{"field": "status", "before": "paused", "after": "active", "digested": []}]
    assert sorted(updated["changes"], key=lambda c: c["field"]) == [
        {"field": "name", "before": job["name"], "after": "renamed", "digested": []},
        {"field": "request.headers.Authorization", "before": "***", "after": "***", "digested": []},
        {"field": "request.headers.X-Team", "before": "a", "after": "b", "digested": []},
    ]
    created_fields = {c["field"]: c for c in created["changes"]}
    assert created_fields["request.headers.Authorization"] == {
        "field": "request.headers.Authorization", "before": None, "after": "***", "digested": []}
    assert created_fields["schedule"]["after"] == job["schedule"]
    assert created_fields["status"]["after"] == "active"
    assert [e["at"] for e in found] == sorted((e["at"] for e in found), reverse=True)
    assert HEADER_VALUE not in json.dumps(found) and keyed.token not in json.dumps(found)


def test_secrets_keys_and_the_signing_secret_are_recorded_by_name_never_by_value(keyed: Api, db: Any) -> None:
    assert keyed.call("PUT", "/secrets/TOKEN", {"value": SECRET_VALUE}).status == 201
    assert keyed.call("PUT", "/secrets/TOKEN", {"value": SECRET_VALUE + "2"}).status == 200
    assert keyed.call("POST", "/signing-secret/rotate").status == 200
    made = keyed.call("POST", "/api-keys", {"name": "ci", "scopes": ["jobs:read"]}).body
    assert keyed.call("DELETE", f"/api-keys/{made['id']}").status == 204
    assert keyed.call("DELETE", "/secrets/TOKEN").status == 204

    found = entries(keyed)
    assert [(e["action"], e["target"]) for e in found[:6]] == [
        ("secret.deleted", "TOKEN"), ("api_key.deleted", made["id"]), ("api_key.created", made["id"]),
        ("signing_secret.rotated", None), ("secret.put", "TOKEN"), ("secret.put", "TOKEN")]
    assert found[2]["changes"] == [{"field": "name", "before": None, "after": "ci", "digested": []},
                                   {"field": "scopes", "before": None, "after": ["jobs:read"], "digested": []}]
    stored = "\n".join(r[0] for r in db.execute("SELECT row_to_json(a)::text FROM audit_events a"))
    assert SECRET_VALUE not in stored and made["key"] not in stored and keyed.token not in stored


def test_replays_are_recorded_with_the_run_or_the_window_and_a_dry_run_is_not(keyed: Api, db: Any) -> None:
    job = keyed.create()
    first, _ = add_runs(db, keyed.tenant_id, job["id"], START - timedelta(hours=2), START - timedelta(hours=1))
    assert keyed.call("POST", f"/executions/{first}/replay").status == 202
    ask = {"since": "2026-03-01T10:30:00Z", "until": "2026-03-01T12:00:00Z"}
    assert keyed.call("POST", f"/jobs/{job['id']}/replay", {**ask, "dry_run": True}).status == 202
    assert keyed.call("POST", f"/jobs/{job['id']}/replay", ask).body["count"] == 1
    found = [(e["action"], e["target"]) for e in entries(keyed, job_id=job["id"])]
    assert found == [("job.replayed", "2026-03-01T10:30:00.000Z/2026-03-01T12:00:00.000Z"), ("job.replayed", first),
                     ("job.created", job["name"])]


def add_runs(db: Any, tenant_id: str, job_id: str, *slots: datetime) -> list[str]:
    """Failed runs of the job at these slots, as the executors leave them."""
    ids = [str(uuid.uuid4()) for _ in slots]
    for run_id, slot in zip(ids, slots):
        db.execute("INSERT INTO executions (id, tenant_id, job_id, scheduled_for, trigger, status, attempt_count,"
                   " finished_at) VALUES (%s, %s, %s, %s, 'schedule', 'failed', 1, %s)",
                   (run_id, tenant_id, job_id, slot, slot))
    return ids


def test_calendars_are_recorded_by_name(keyed: Api) -> None:
    assert keyed.call("PUT", "/calendars/holidays", {"dates": ["2026-12-25"]}).status == 201
    assert keyed.call("PUT", "/calendars/holidays", {"dates": ["2026-12-25", "2026-12-26"]}).status == 200
    assert keyed.call("DELETE", "/calendars/holidays").status == 204
    found = [(e["action"], e["target"], e["changes"]) for e in entries(keyed) if e["action"].startswith("calendar.")]
    assert found == [("calendar.deleted", "holidays", None), ("calendar.put", "holidays", None),
                     ("calendar.put", "holidays", None)]


def test_a_change_refused_or_rolled_back_records_nothing(keyed: Api) -> None:
    refused = keyed.call("POST", "/jobs", job_body(request={"headers": {"X-Token": "${secrets.NOPE}"}}))
    assert refused.status == 400
    job = keyed.create()
    assert keyed.call("PATCH", f"/jobs/{job['id']}", {"request": {"url": "http://127.0.0.1/"}}).status == 400
    assert keyed.call("DELETE", "/secrets/NOPE").status == 404
    assert [e["action"] for e in entries(keyed) if e["action"] != "api_key.created"] == ["job.created"]


def test_the_log_pages_newest_first_and_narrows_by_action_job_and_time(keyed: Api) -> None:
    jobs = [keyed.create(name=f"job-{n}") for n in range(3)]
    for job in jobs:
        assert keyed.call("POST", f"/jobs/{job['id']}/pause").status == 200
    everything = entries(keyed, limit="200")
    seen: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        reply = keyed.call("GET", "/audit", query={"limit": "2", **({"cursor": cursor} if cursor else {})}).body
        seen += reply["items"]
        cursor = reply["next_cursor"]
        if cursor is None:
            break
    assert [e["id"] for e in seen] == [e["id"] for e in everything] and len(everything) == 7
    assert [e["job_id"] for e in entries(keyed, action="job.paused")] == [j["id"] for j in reversed(jobs)]
    assert [e["action"] for e in entries(keyed, job_id=jobs[1]["id"].upper())] == ["job.paused", "job.created"]
    middle = everything[3]["at"]
    assert [e["id"] for e in entries(keyed, since=middle)] == [e["id"] for e in everything[:4]]
    assert [e["id"] for e in entries(keyed, until=middle)] == [e["id"] for e in everything[4:]]


def test_a_tenant_sees_only_its_own_entries(keyed: Api, other: Api) -> None:
    job = keyed.create()
    assert keyed.call("PUT", "/secrets/MINE", {"value": "v"}).status == 201
    assert other.call("PUT", "/secrets/THEIRS", {"value": "v"}).status == 201
    assert entries(other, job_id=job["id"]) == []
    theirs = entries(other)
    assert [(e["action"], e["target"], e["key_name"]) for e in theirs] == [("secret.put", "THEIRS", "b-key")]
    assert {e["action"] for e in entries(keyed)} == {"api_key.created", "job.created", "secret.put"}
    assert other.call("GET", "/audit", query={"cursor": keyed.call(
        "GET", "/audit", query={"limit": "1"}).body["next_cursor"]}).body["items"] == []


@pytest.mark.parametrize(("query", "field"), [
    ({"action": "job.exploded"}, "action"),
    ({"job_id": "not-a-uuid"}, "job_id"),
    ({"since": "2026-03-01"}, "since"),
    ({"until": "2026-03-01T12:00:00"}, "until"),
    ({"since": "2026-03-01T12:00:00Z", "until": "2026-03-01T11:00:00Z"}, "until"),
    ({"cursor": "bm9wZQ"}, "cursor"),
    ({"limit": "0"}, "limit"),
    ({"limit": "201"}, "limit"),
    ({"actions": "job.run"}, "actions"),
])
def test_bad_audit_queries_are_400s_naming_the_parameter(api: Api, query: dict[str, str], field: str) -> None:
    assert error_field(api.call("GET", "/audit", query=query)) == (400, field)


def test_an_executions_cursor_is_not_an_audit_cursor(api: Api) -> None:
    for n in range(2):
        api.create(name=f"job-{n}")
        api.call("POST", f"/jobs/{api.create(name=f'run-{n}')['id']}/run")
    cursor = api.call("GET", "/executions", query={"limit": "1"}).body["next_cursor"]
    assert cursor is not None
    assert error_field(api.call("GET", "/audit", query={"cursor": cursor})) == (400, "cursor")


def key_with(api: Api, *scopes: str) -> str:
    reply = api.call("POST", "/api-keys", {"name": "-".join(scopes), "scopes": list(scopes)})
    assert reply.status == 201, reply.body
    return str(reply.body["key"])


def test_who_made_a_change_from_where_and_its_values_need_audit_read(keyed: Api, db: Any) -> None:
    """jobs:read showed key names, scopes, client addresses and the bodies of deleted jobs: it now gets what was
    done to what, when, and which fields; audit:read (which a key administering keys holds) gets the rest."""
    job = keyed.create(request={"method": "POST", "body": "deleted-body-canary"})
    assert keyed.call("PATCH", f"/jobs/{job['id']}", {"request": {"body": "second-body-canary"}}).status == 200
    assert keyed.call("DELETE", f"/jobs/{job['id']}").status == 204
    reader, auditor = key_with(keyed, "jobs:read"), key_with(keyed, "jobs:read", "audit:read")

    redacted = keyed.call("GET", "/audit", token=reader)
    assert redacted.status == 200 and redacted.body["redacted"] is True
    for secret in ("canary", "deployer", "jobs:read", CONTEXT["http"]["sourceIp"]):
        assert secret not in redacted.raw
    shown = {e["action"]: e for e in redacted.body["items"]}
    assert set(shown) == {"job.deleted", "job.updated", "job.created", "api_key.created"}
    assert shown["job.updated"]["changes"] == [{"field": "request.body", "before": None, "after": None,
                                                "digested": []}]
    assert [c["field"] for c in shown["api_key.created"]["changes"]] == ["name", "scopes"]
    for entry in shown.values():
        assert (entry["key_id"], entry["key_name"], entry["client_ip"]) == (None, None, None)
        assert entry["request_id"] == CONTEXT["requestId"]

    full = [keyed.call("GET", "/audit", token=token).body for token in (auditor, keyed.token)]
    for body in full:
        assert body["redacted"] is False and "deployer" in {e["key_name"] for e in body["items"]}
        updated = next(e for e in body["items"] if e["action"] == "job.updated")
        assert updated["changes"][0]["before"] == "deleted-body-canary"
        assert updated["client_ip"] == CONTEXT["http"]["sourceIp"]
    # audit:read is an addition to jobs:read, not a way around it.
    only_audit = keyed.call("GET", "/audit", token=key_with(keyed, "audit:read"))
    assert only_audit.status == 403 and only_audit.body["error"]["message"] == "this API key lacks the scope jobs:read"


def test_the_log_needs_a_key_with_jobs_read(api: Api) -> None:
    assert api.call("GET", "/audit", token=None).status == 401
    key = api.call("POST", "/api-keys", {"name": "writer", "scopes": ["jobs:write"]}).body["key"]
    refused = api.call("GET", "/audit", token=key)
    assert refused.status == 403 and refused.body["error"]["message"] == "this API key lacks the scope jobs:read"


def wide_body(seed: int) -> str:
    """64K characters of 4 UTF-8 bytes each (the longest body a job takes, at its most bytes), in a pinned
    random order so that compression does not hide their size."""
    rng = random.Random(seed)
    return "".join(chr(rng.randrange(0x1F300, 0x1F600)) for _ in range(64 * 1024))


def entry_bytes(db: Any, entry_id: str) -> int:
    """An entry's size: the JSON text of its whole row, as the database holds it."""
    return int(db.execute("SELECT octet_length(row_to_json(a)::text) FROM audit_events a WHERE id = %s",
                          (entry_id,)).fetchone()[0])


def test_a_patch_of_a_64k_character_body_keeps_an_entry_of_bounded_size(keyed: Api, db: Any) -> None:
    """The issue's case: such a PATCH kept both bodies whole (~0.5 MB an entry). A long value is now kept as its
    size and SHA-256, so a reader still sees that it changed and can check a value they hold against it."""
    old, new = wide_body(1), wide_body(2)
    job = keyed.create(request={"method": "POST", "body": old, "headers": {"Authorization": "Bearer t"}})
    assert keyed.call("PATCH", f"/jobs/{job['id']}", {"request": {"body": new}}).status == 200

    updated = entries(keyed, action="job.updated")[0]
    size = entry_bytes(db, updated["id"])
    print(f"\nbytes per audit entry, a PATCH of a 64K-character body: {size}")
    assert size <= audit_bounds.ENTRY_BYTES
    (change,) = [c for c in updated["changes"] if c["field"] == "request.body"]
    assert change["before"] == {"size": len(old.encode()), "sha256": hashlib.sha256(old.encode()).hexdigest()}
    assert change["after"] == {"size": len(new.encode()), "sha256": hashlib.sha256(new.encode()).hexdigest()}
    assert change["digested"] == ["before", "after"]
    created = entries(keyed, action="job.created")[0]
    print(f"bytes per audit entry, the POST /jobs of that job: {entry_bytes(db, created['id'])}")
    assert entry_bytes(db, created["id"]) <= audit_bounds.ENTRY_BYTES
    fields = {c["field"]: c for c in created["changes"]}
    assert fields["request.headers.Authorization"]["after"] == "***"  # sealed values stay masked, never digested
    assert fields["request.method"] == {"field": "request.method", "before": None, "after": "POST", "digested": []}
