"""The API of completion callbacks: a job's `completion`, the runs awaiting it, and POST /callbacks/..."""
from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from tests.integration.api_client import Api, job_body
from tickwork.rules import completion
from tickwork.store import completions as completions_store
from tickwork.store.tenants import create_api_key, create_tenant

CALLBACK = {"mode": "callback", "timeout_seconds": 900}


@pytest.fixture
def other(api: Api, db: Any) -> Api:
    tenant_id = create_tenant(db, "tenant-b")
    return Api(api.handler, create_api_key(db, tenant_id), tenant_id, api.index)


def test_completion_is_stored_shown_and_changed(api: Api) -> None:
    assert api.create()["completion"] == {"mode": "response", "timeout_seconds": None}
    job = api.create(completion=CALLBACK)
    assert job["completion"] == CALLBACK
    assert api.create(completion={"mode": "callback"})["completion"] == {
        "mode": "callback", "timeout_seconds": completion.DEFAULT_TIMEOUT_SECONDS}
    patched = api.call("PATCH", f"/jobs/{job['id']}", {"completion": {"mode": "response"}})
    assert patched.status == 200 and patched.body["completion"] == {"mode": "response", "timeout_seconds": None}
    assert api.call("GET", f"/jobs/{job['id']}").body["completion"]["mode"] == "response"


@pytest.mark.parametrize(("value", "field"), [
    ({"mode": "callback", "timeout_seconds": 0}, "completion.timeout_seconds"),
    ({"mode": "callback", "timeout_seconds": 86_401}, "completion.timeout_seconds"),
    ({"mode": "response", "timeout_seconds": 60}, "completion.timeout_seconds"),
    ({"mode": "webhook"}, "completion.mode"),
    ({"mode": "callback", "url": "https://example.com"}, "completion.url"),
    ("callback", "completion"),
])
def test_invalid_completion_is_a_400_naming_the_field(api: Api, value: Any, field: str) -> None:
    created = api.call("POST", "/jobs", job_body(completion=value))
    assert created.status == 400 and created.body["error"]["field"] == field, created.body
    job = api.create()
    patched = api.call("PATCH", f"/jobs/{job['id']}", {"completion": value})
    assert patched.status == 400 and patched.body["error"]["field"] == field, patched.body


def test_null_completion_in_a_patch_is_refused(api: Api) -> None:
    job = api.create(completion=CALLBACK)
    patched = api.call("PATCH", f"/jobs/{job['id']}", {"completion": None})
    assert patched.status == 400 and patched.body["error"]["field"] == "completion"


def awaiting_run(api: Api, db: Any, job: dict[str, Any] | None = None) -> tuple[str, str]:
    """A run of `job` (by default a new callback-mode job) awaiting its completion, as the executor leaves it;
    returns (id, token)."""
    job = job or api.create(completion=CALLBACK)
    run = api.call("POST", f"/jobs/{job['id']}/run").body
    token = completion.new_token()
    db.execute("UPDATE executions SET status = 'running', attempt_count = 1, started_at = now(),"
               " attempt_started_at = now() WHERE id = %s", (run["id"],))
    completions_store.arm(db, run["id"], 1, completion.token_hash(token))
    now = datetime.now(timezone.utc)
    completions_store.await_completion(db, [completions_store.Answered(
        run["id"], 1, now + timedelta(seconds=900), now, 12, 202, "accepted")])
    return run["id"], token


def test_a_run_awaiting_is_listed_and_counted_for_its_tenant_only(api: Api, other: Api, db: Any) -> None:
    run_id, _ = awaiting_run(api, db)
    listed = api.call("GET", "/executions", query={"status": "awaiting_completion"}).body["items"]
    assert [item["id"] for item in listed] == [run_id] and listed[0]["completion_deadline"] is not None
    assert other.call("GET", "/executions", query={"status": "awaiting_completion"}).body["items"] == []
    assert other.call("GET", f"/executions/{run_id}").status == 404
    assert api.call("GET", "/stats").body["runs"]["awaiting_completion"] == 1
    assert other.call("GET", "/stats").body["runs"]["awaiting_completion"] == 0


def test_a_callback_needs_no_key_and_ends_the_run(api: Api, db: Any) -> None:
    run_id, token = awaiting_run(api, db)
    reply = api.call("POST", f"/callbacks/{run_id}/1/{token}", {"status": "succeeded", "output": "done"}, token=None)
    assert reply.status == 200, reply.body
    assert reply.body == {"execution_id": run_id, "attempt": 1, "status": "succeeded"}
    detail = api.call("GET", f"/executions/{run_id}").body
    assert detail["status"] == "succeeded" and detail["completion_deadline"] is None
    assert detail["attempts"][0]["output"] == "done"
    again = api.call("POST", f"/callbacks/{run_id}/1/{token}", {"status": "failed"}, token=None)
    assert again.status == 409 and token not in again.raw


@pytest.mark.parametrize("path", [
    "/callbacks/{run}/1/{wrong}", "/callbacks/{run}/2/{token}", "/callbacks/{other}/1/{token}",
    "/callbacks/not-a-uuid/1/{token}", "/callbacks/{run}/one/{token}", "/callbacks/{run}/0/{token}",
])
def test_a_wrong_token_attempt_or_run_is_a_404_that_changes_nothing(api: Api, db: Any, path: str) -> None:
    run_id, token = awaiting_run(api, db)
    url = path.format(run=run_id, token=token, wrong=completion.new_token(), other=uuid.uuid4())
    reply = api.call("POST", url, {"status": "succeeded"}, token=None)
    assert reply.status == 404 and reply.body["error"]["code"] == "not_found"
    assert api.call("GET", f"/executions/{run_id}").body["status"] == "awaiting_completion"


@pytest.mark.parametrize(("body", "field"), [
    ({"status": "done"}, "status"),
    ({}, "status"),
    ({"status": "succeeded", "output": "x" * (completion.MAX_OUTPUT_BYTES + 1)}, "output"),
    ({"status": "succeeded", "output": "é" * (completion.MAX_OUTPUT_BYTES // 2 + 1)}, "output"),
    ({"status": "succeeded", "extra": 1}, "extra"),
])
def test_an_invalid_report_is_a_400_naming_the_field_and_changes_nothing(
        api: Api, db: Any, body: dict[str, Any], field: str) -> None:
    run_id, token = awaiting_run(api, db)
    reply = api.call("POST", f"/callbacks/{run_id}/1/{token}", body, token=None)
    assert reply.status == 400 and reply.body["error"]["field"] == field, reply.body
    assert api.call("GET", f"/executions/{run_id}").body["status"] == "awaiting_completion"


def test_output_is_redacted_as_a_response_body(api: Api, db: Any) -> None:
    job = api.create(completion=CALLBACK, request={"headers": {"Authorization": "Bearer sekrit-value-123"}})
    run = api.call("POST", f"/jobs/{job['id']}/run").body
    token = completion.new_token()
    db.execute("UPDATE executions SET status = 'running', attempt_count = 1, started_at = now(),"
               " attempt_started_at = now() WHERE id = %s", (run["id"],))
    completions_store.arm(db, run["id"], 1, completion.token_hash(token))
    reply = api.call("POST", f"/callbacks/{run['id']}/1/{token}",
                     {"status": "succeeded", "output": f"auth was sekrit-value-123, url had {token}"}, token=None)
    assert reply.status == 200 and reply.body["status"] == "running"  # its answer is not recorded yet
    stored = db.execute("SELECT completion_output FROM executions WHERE id = %s", (run["id"],)).fetchone()[0]
    assert stored == "auth was ***, url had ***"



SENT = "sent-secret-4f1d2c"
ROTATED = "rotated-secret-9a8b7c"


def _change_secret(api: Api, db: Any, change: str) -> str | None:
    """Change the job's secret TOKEN after its attempt was sent; returns its value now (None: none readable)."""
    if change == "deleted":
        assert api.call("DELETE", "/secrets/TOKEN").status == 204
        return None
    if change == "unreadable":  # sealed under a key or context it does not open with (a restore gone wrong)
        other = db.execute("SELECT sealed FROM secrets WHERE name = 'OTHER'").fetchone()[0]
        db.execute("UPDATE secrets SET sealed = %s WHERE name = 'TOKEN'", (other,))
        return None
    value, hosts = (SENT, ["elsewhere.example.net"]) if change == "moved_hosts" else (ROTATED, None)
    reply = api.call("PUT", "/secrets/TOKEN", {"value": value, "allowed_hosts": hosts})
    assert reply.status == 200, reply.body
    return value


@pytest.mark.parametrize("change", ["rotated", "moved_hosts", "deleted", "unreadable"])
def test_a_callback_after_the_jobs_secret_changed_keeps_its_completion(api: Api, db: Any, change: str) -> None:
    """The token does not depend on any secret; the output's redaction read the job's secrets as if to send
    the request again, and answered 500 (completion lost) once a secret was deleted or moved to other hosts."""
    assert api.call("PUT", "/secrets/TOKEN", {"value": SENT, "allowed_hosts": ["example.com"]}).status == 201
    assert api.call("PUT", "/secrets/OTHER", {"value": ROTATED}).status == 201
    job = api.create(completion=CALLBACK, request={
        "url": "https://example.com/hooks/${secrets.TOKEN}", "headers": {"Authorization": "Bearer ${secrets.TOKEN}"}})
    run_id, token = awaiting_run(api, db, job)
    now_value = _change_secret(api, db, change)

    output = f"exported 42 rows for {now_value}" if now_value else "exported 42 rows"
    reply = api.call("POST", f"/callbacks/{run_id}/1/{token}", {"status": "succeeded", "output": output}, token=None)
    assert reply.status == 200, reply.body
    assert reply.body == {"execution_id": run_id, "attempt": 1, "status": "succeeded"}
    detail = api.call("GET", f"/executions/{run_id}").body
    assert detail["status"] == "succeeded"
    assert detail["attempts"][0]["output"] == ("exported 42 rows for ***" if now_value else "exported 42 rows")
