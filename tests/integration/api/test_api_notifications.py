"""The API of notifications, auto-pause, success rules and the new retry fields."""
from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from tests.integration.api_client import Api
from tickwork.store.tenants import create_api_key, create_tenant

NOTIFY = {"url": "https://example.com/tickwork-events", "on": ["failure", "paused"]}


@pytest.fixture
def other(api: Api, db: Any) -> Api:
    tenant_id = create_tenant(db, "tenant-b")
    return Api(api.handler, create_api_key(db, tenant_id), tenant_id, api.index)


def test_the_new_fields_are_stored_and_shown(api: Api) -> None:
    job = api.create(notify=NOTIFY, pause_after_failures=5,
                     success={"status_codes": [200, "3XX"], "body_contains": "done"},
                     retry={"jitter": "equal", "max_delay_seconds": 600, "past_next_run": True})
    assert job["notify"] == NOTIFY and job["pause_after_failures"] == 5 and job["paused_reason"] is None
    assert job["success"] == {"status_codes": [200, "3xx"], "body_contains": "done"}
    assert (job["retry"]["jitter"], job["retry"]["max_delay_seconds"], job["retry"]["past_next_run"]) == (
        "equal", 600, True)
    assert api.call("GET", f"/jobs/{job['id']}").body["notify"] == NOTIFY


def test_defaults(api: Api) -> None:
    job = api.create()
    assert (job["notify"], job["pause_after_failures"], job["success"]) == (None, None, None)
    assert (job["retry"]["jitter"], job["retry"]["max_delay_seconds"], job["retry"]["past_next_run"]) == (
        "full", 3600, False)
    listed = api.create(notify={"url": "https://example.com/n"})["notify"]
    assert listed["on"] == ["failure", "recovery", "paused"]


@pytest.mark.parametrize(("fields", "field"), [
    ({"notify": {"on": ["failure"]}}, "notify.url"),
    ({"notify": {"url": "https://example.com/n", "on": []}}, "notify.on"),
    ({"notify": {"url": "https://example.com/n", "on": ["always"]}}, "notify.on.0"),
    ({"notify": {"url": "https://example.com/n", "secret": "x"}}, "notify.secret"),
    ({"notify": {"url": "ftp://example.com/n"}}, "notify.url"),
    ({"notify": {"url": "http://127.0.0.1/n"}}, "notify.url"),
    ({"notify": {"url": "http://169.254.169.254/latest"}}, "notify.url"),
    ({"notify": "https://example.com/n"}, "notify"),
    ({"pause_after_failures": 0}, "pause_after_failures"),
    ({"pause_after_failures": 1001}, "pause_after_failures"),
    ({"success": {"status_codes": ["6xx"]}}, "success.status_codes"),
    ({"success": {"status_codes": []}}, "success.status_codes"),
    ({"success": {"status_codes": [True]}}, "success.status_codes"),
    ({"success": {"body_contains": ""}}, "success.body_contains"),
    ({"success": {"codes": [200]}}, "success.codes"),
    ({"retry": {"jitter": "half"}}, "retry.jitter"),
    ({"retry": {"max_delay_seconds": 0}}, "retry.max_delay_seconds"),
    ({"retry": {"max_delay_seconds": 86_401}}, "retry.max_delay_seconds"),
    ({"retry": {"past_next_run": "sometimes"}}, "retry.past_next_run"),
])
def test_invalid_fields_are_400s_naming_them(api: Api, fields: dict[str, Any], field: str) -> None:
    from tests.integration.api_client import job_body

    created = api.call("POST", "/jobs", job_body(**fields))
    assert created.status == 400, created.body
    assert created.body["error"]["field"] == field
    job = api.create()
    patched = api.call("PATCH", f"/jobs/{job['id']}", fields)
    assert patched.status == 400 and patched.body["error"]["field"] == field


def test_an_unsafe_notify_url_does_not_echo_it(api: Api) -> None:
    from tests.integration.api_client import job_body

    reply = api.call("POST", "/jobs", job_body(notify={"url": "http://10.1.2.3/token-abc"}))
    assert reply.status == 400 and "token-abc" not in reply.raw and "10.1.2.3" not in reply.raw


def test_patch_sets_and_clears(api: Api) -> None:
    job = api.create()
    set_ = api.call("PATCH", f"/jobs/{job['id']}", {"notify": NOTIFY, "pause_after_failures": 2,
                                                     "success": {"status_codes": [204]}, "retry": {"jitter": "none"}})
    assert set_.status == 200, set_.body
    assert (set_.body["notify"], set_.body["pause_after_failures"], set_.body["success"]["status_codes"]) == (
        NOTIFY, 2, [204])
    assert set_.body["retry"]["jitter"] == "none" and set_.body["retry"]["max_delay_seconds"] == 3600
    cleared = api.call("PATCH", f"/jobs/{job['id']}", {"notify": None, "pause_after_failures": None, "success": None})
    assert (cleared.body["notify"], cleared.body["pause_after_failures"], cleared.body["success"]) == (None, None, None)


def test_resume_clears_the_pause_reason_and_the_failure_count(api: Api, db: Any) -> None:
    job = api.create(pause_after_failures=2)
    db.execute("UPDATE jobs SET status = 'paused', next_run_at = NULL, paused_reason = 'paused after 2 consecutive"
               " failed runs (pause_after_failures: 2)', consecutive_failures = 2 WHERE id = %s", (job["id"],))
    assert api.call("GET", f"/jobs/{job['id']}").body["paused_reason"].startswith("paused after 2")
    resumed = api.call("POST", f"/jobs/{job['id']}/resume")
    assert resumed.status == 200 and resumed.body["status"] == "active" and resumed.body["paused_reason"] is None
    assert db.execute("SELECT consecutive_failures FROM jobs WHERE id = %s", (job["id"],)).fetchone()[0] == 0


def _notification(db: Any, job: dict[str, Any], tenant_id: str, kind: str, channel: str = "webhook") -> str:
    notification_id, execution_id = str(uuid.uuid4()), str(uuid.uuid4())
    payload = {"id": notification_id, "type": kind, "job_id": job["id"], "execution_id": execution_id}
    db.execute("INSERT INTO notifications (id, tenant_id, job_id, execution_id, channel, type, url, payload,"
               " next_attempt_at, status, attempt_count, last_status_code, last_error)"
               " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, now(), 'pending', 1, 503, 'HTTP 503')",
               (notification_id, tenant_id, job["id"], execution_id, channel, kind, NOTIFY["url"], json.dumps(payload)))
    return notification_id


def test_a_jobs_notifications_are_listed_for_its_tenant_only(api: Api, other: Api, db: Any) -> None:
    job = api.create(notify=NOTIFY)
    path = f"/jobs/{job['id']}/notifications"
    assert api.call("GET", path).body == {"items": []}
    shown = _notification(db, job, api.tenant_id, "run.failed")
    _notification(db, job, api.tenant_id, "run.failed", channel="operator")  # the deployment's, not the tenant's
    (item,) = api.call("GET", path).body["items"]
    assert (item["id"], item["type"], item["status"], item["attempts"]) == (shown, "run.failed", "pending", 1)
    assert (item["last_status_code"], item["last_error"], item["event"]["id"]) == (503, "HTTP 503", shown)
    assert item["next_attempt_at"] is not None
    for reply in (other.call("GET", path), api.call("GET", "/jobs/not-a-uuid/notifications"),
                  api.call("GET", f"/jobs/{uuid.uuid4()}/notifications")):
        assert reply.status == 404 and reply.body["error"]["code"] == "not_found"
