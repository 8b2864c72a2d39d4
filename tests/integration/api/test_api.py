"""The management API end to end: the real handler, events built from events/api_*.json, real Postgres and Redis.

Errors and validation live in test_api_errors.py; this module covers what the API does when the input is good.
"""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

import pytest

from tests.conftest import load_event
from tests.integration.api_client import TARGET_SECRET, Api, job_body, use_clock
from tests.support import score_of
from tickwork.dueindex.entries import execution_member, job_member
from tickwork.dueindex.index import DueIndex
from tickwork.models import StartedExecution
from tickwork.schedule.engine import parse_schedule
from tickwork.secrets import vault
from tickwork.store import attempts as attempts_store
from tickwork.store import executions as executions_store
from tickwork.store.secrets import PoolKeyStore
from tickwork.store.tenants import create_api_key, create_tenant
from tickwork.timeutil import parse_rfc3339, to_ms
from tickwork.vocab import RunStatus
from tickwork.wiring import Services


@pytest.fixture
def other(api: Api, db: Any) -> Api:
    """A second tenant, calling the same API with its own key."""
    tenant_id = create_tenant(db, "tenant-b")
    return Api(api.handler, create_api_key(db, tenant_id), tenant_id, api.index)


def ms(timestamp: str) -> int:
    return to_ms(parse_rfc3339(timestamp))


def stored_job(db: Any, job_id: str) -> dict[str, Any]:
    row = db.execute("SELECT request, status, version, next_run_at, deleted_at FROM jobs WHERE id = %s",
                     (job_id,)).fetchone()
    return dict(zip(("request", "status", "version", "next_run_at", "deleted_at"), row))


def opened_headers(services: Services, tenant_id: str, job_id: str, stored: dict[str, str]) -> dict[str, str]:
    """Stored header values as the executor sends them (sensitive ones are stored sealed)."""
    assert services.keyring is not None
    return vault.opened_headers(services.keyring, PoolKeyStore(services.db), tenant_id, job_id, stored)


def indexed_spec(services: Services, index: DueIndex, job_id: str) -> dict[str, Any] | None:
    raw = services.redis.hget(index.specs_key, job_id)
    return None if raw is None else json.loads(raw)


# The instant the API's clock is pinned to (use_clock) in the tests whose verdict depends on "now": one
# clock for the whole test, so it holds on any date. A Tuesday, off the whole second.
PINNED = datetime(2025, 3, 4, 5, 6, 7, 250000, tzinfo=timezone.utc)


def pinned() -> datetime:
    use_clock(PINNED.timestamp)
    return PINNED


# ---------------------------------------------------------------- create, read, list

def test_the_create_event_as_shipped_creates_an_indexed_job(api: Api, handler: Callable[[str], Any]) -> None:
    reply = Api._reply(handler("api")(load_event("api_create_job.json"), None))

    assert reply.status == 201, reply.body
    job = reply.body
    assert job["status"] == "active"
    assert job["schedule"] == parse_schedule("0 30 2 * * *").canonical
    assert job["timezone"] == "Europe/Paris"
    assert job["version"] == 1
    assert ms(job["next_run_at"]) > ms(job["created_at"])
    assert score_of(api.index, job_member(job["id"])) == ms(job["next_run_at"])
    assert job["next_fire_times"][0] == job["next_run_at"]
    assert len(job["next_fire_times"]) == 5
    assert job["request"]["timeout_seconds"] == 20
    assert job["retry"] == {"strategy": "exponential", "max_attempts": 4, "delay_seconds": 30, "jitter": "full",
                            "max_delay_seconds": 3600, "past_next_run": False}


def test_next_run_is_the_first_slot_after_now_in_the_jobs_zone(api: Api) -> None:
    at = pinned()
    job = api.create(schedule="0 0 9 * * *", timezone="America/New_York")

    schedule = parse_schedule("0 0 9 * * *", "America/New_York")
    assert parse_rfc3339(job["next_run_at"]) == schedule.next_after(at)
    assert job["next_fire_times"] == [job["next_run_at"]] + [
        f"{t:%Y-%m-%dT%H:%M:%S}.000Z" for t in schedule.preview(parse_rfc3339(job["next_run_at"]), 4)
    ]


def test_schedule_is_returned_in_canonical_form(api: Api) -> None:
    job = api.create(schedule="*/15 * * * *")
    assert job["schedule"] == parse_schedule("*/15 * * * *").canonical


def test_defaults_get_then_post_with_body(api: Api) -> None:
    minimal = {"name": "ping", "schedule": "0 0 * * * *", "request": {"url": "https://example.com/ping"}}
    job = api.call("POST", "/jobs", minimal).body
    assert job["timezone"] == "UTC"
    assert job["request"] == {"method": "GET", "url": "https://example.com/ping", "headers": {}, "body": None,
                              "timeout_seconds": 30}
    assert job["retry"] == {"strategy": "exponential", "max_attempts": 3, "delay_seconds": 10,
        "jitter": "full", "max_delay_seconds": 3600, "past_next_run": False}

    with_body = {**minimal, "request": {"url": "https://example.com/ping", "body": "{}"}}
    assert api.call("POST", "/jobs", with_body).body["request"]["method"] == "POST"


def test_secret_headers_are_redacted_in_every_response_and_stored_sealed(api: Api, db: Any,
                                                                          services: Services) -> None:
    headers = {"Authorization": f"Bearer {TARGET_SECRET}", "X-Api-Key": TARGET_SECRET, "Cookie": TARGET_SECRET,
               "X-Webhook-Secret": TARGET_SECRET, "X-Trace": "visible"}
    created = api.call("POST", "/jobs", job_body(request={"headers": headers}))
    job_id = created.body["id"]
    replies = [created, api.call("GET", f"/jobs/{job_id}"), api.call("GET", "/jobs"),
               api.call("PATCH", f"/jobs/{job_id}", {"name": "renamed"}), api.call("POST", f"/jobs/{job_id}/pause")]

    for reply in replies:
        assert reply.status in (200, 201)
        assert TARGET_SECRET not in reply.raw
    shown = created.body["request"]["headers"]
    assert shown == {"Authorization": "***", "X-Api-Key": "***", "Cookie": "***", "X-Webhook-Secret": "***",
                     "X-Trace": "visible"}
    stored = stored_job(db, job_id)["request"]["headers"]
    assert TARGET_SECRET not in json.dumps(stored) and stored["X-Trace"] == "visible"
    opened = opened_headers(services, api.tenant_id, job_id, stored)
    assert opened == headers


def test_get_shows_the_job_with_its_next_five_runs(api: Api) -> None:
    job = api.create(schedule="0 0 * * * *")
    reply = api.call("GET", f"/jobs/{job['id']}")

    assert reply.status == 200
    assert reply.body == job
    times = [ms(t) for t in reply.body["next_fire_times"]]
    assert len(times) == 5 and times == sorted(times)
    assert all(b - a == 3_600_000 for a, b in zip(times, times[1:]))
    assert reply.body["schedule_description"]


def test_list_pages_newest_first_with_an_opaque_cursor(api: Api) -> None:
    created = [api.create(name=f"job-{i}")["id"] for i in range(5)]

    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        query = {"limit": "2", **({"cursor": cursor} if cursor else {})}
        reply = api.call("GET", "/jobs", query=query)
        assert reply.status == 200, reply.body
        seen += [item["id"] for item in reply.body["items"]]
        cursor = reply.body["next_cursor"]
        pages += 1
        if cursor is None:
            break
    assert pages == 3
    assert seen == list(reversed(created))
    assert "next_fire_times" not in api.call("GET", "/jobs").body["items"][0]


def test_list_default_limit_and_empty_list(api: Api, other: Api) -> None:
    assert api.call("GET", "/jobs").body == {"items": [], "next_cursor": None}
    for i in range(3):
        api.create(name=f"job-{i}")
    assert len(api.call("GET", "/jobs").body["items"]) == 3
    assert other.call("GET", "/jobs").body == {"items": [], "next_cursor": None}


# ---------------------------------------------------------------- update

def test_patch_schedule_moves_the_index_and_bumps_the_version(api: Api, services: Services) -> None:
    at = pinned()
    job = api.create(schedule="0 0 3 * * *", timezone="UTC")
    reply = api.call("PATCH", f"/jobs/{job['id']}", {"schedule": "0 15 * * * *"})

    assert reply.status == 200, reply.body
    updated = reply.body
    schedule = parse_schedule("0 15 * * * *")
    assert updated["schedule"] == schedule.canonical
    assert updated["version"] == 2
    assert parse_rfc3339(updated["next_run_at"]) == schedule.next_after(at)
    assert score_of(api.index, job_member(job["id"])) == ms(updated["next_run_at"])
    spec = indexed_spec(services, api.index, job["id"])
    assert spec is not None and spec["v"] == 2
    assert ms(updated["updated_at"]) >= ms(job["updated_at"])


def test_patch_time_zone_alone_reschedules(api: Api) -> None:
    job = api.create(schedule="0 0 9 * * *", timezone="UTC")
    updated = api.call("PATCH", f"/jobs/{job['id']}", {"timezone": "Asia/Tokyo"}).body
    assert updated["version"] == 2
    assert updated["timezone"] == "Asia/Tokyo"
    assert parse_rfc3339(updated["next_run_at"]).hour == 0  # 09:00 in Tokyo is 00:00 UTC
    assert score_of(api.index, job_member(job["id"])) == ms(updated["next_run_at"])


def test_patch_same_schedule_changes_nothing(api: Api) -> None:
    job = api.create(schedule="0 0 9 * * *")
    reply = api.call("PATCH", f"/jobs/{job['id']}", {"schedule": "0 0 9 * * *"})
    assert reply.body["version"] == 1
    assert reply.body["updated_at"] == job["updated_at"]


def test_patch_request_fields_is_visible_to_the_next_run_without_rescheduling(api: Api, db: Any,
                                                                            services: Services) -> None:
    job = api.create()
    reply = api.call("PATCH", f"/jobs/{job['id']}",
                     {"name": "renamed", "request": {"url": "https://example.org/new", "timeout_seconds": 5},
                      "retry": {"max_attempts": 1}})

    assert reply.status == 200, reply.body
    assert reply.body["name"] == "renamed"
    assert reply.body["version"] == 1
    assert reply.body["next_run_at"] == job["next_run_at"]
    assert reply.body["retry"] == {"strategy": "exponential", "max_attempts": 1, "delay_seconds": 30,
        "jitter": "full", "max_delay_seconds": 3600, "past_next_run": False}
    stored = stored_job(db, job["id"])["request"]
    # Merged into what was stored: the method, headers and body of the original request are kept.
    assert stored["url"] == "https://example.org/new"
    assert stored["timeout_seconds"] == 5
    assert stored["method"] == "POST"
    opened = opened_headers(services, api.tenant_id, job["id"], stored["headers"])
    assert opened["Authorization"] == f"Bearer {TARGET_SECRET}"


def test_patch_sending_back_redacted_headers_keeps_the_secret(api: Api, db: Any, services: Services) -> None:
    job = api.create()
    shown = job["request"]["headers"]
    assert shown["Authorization"] == "***"

    reply = api.call("PATCH", f"/jobs/{job['id']}", {"request": {"headers": {**shown, "X-New": "1"}}})

    assert reply.status == 200, reply.body
    stored = stored_job(db, job["id"])["request"]["headers"]
    assert TARGET_SECRET not in json.dumps(stored)
    opened = opened_headers(services, api.tenant_id, job["id"], stored)
    assert opened == {"Authorization": f"Bearer {TARGET_SECRET}", "Content-Type": "application/json", "X-New": "1"}


def test_patch_can_clear_the_window(api: Api) -> None:
    start = (pinned() + timedelta(days=2)).replace(microsecond=0)
    job = api.create(schedule="0 0 * * * *", start_at=start.isoformat())
    assert ms(job["next_run_at"]) >= to_ms(start)

    updated = api.call("PATCH", f"/jobs/{job['id']}", {"start_at": None}).body
    assert updated["start_at"] is None
    assert updated["version"] == 2
    assert ms(updated["next_run_at"]) < to_ms(start)


# ---------------------------------------------------------------- pause, resume, delete

def test_pause_removes_the_job_from_the_index(api: Api, services: Services) -> None:
    job = api.create()
    reply = api.call("POST", f"/jobs/{job['id']}/pause")

    assert reply.status == 200
    assert reply.body["status"] == "paused"
    assert reply.body["next_run_at"] is None
    assert reply.body["next_fire_times"] == []
    assert score_of(api.index, job_member(job["id"])) is None
    assert indexed_spec(services, api.index, job["id"]) is None
    assert api.call("POST", f"/jobs/{job['id']}/pause").status == 200  # pausing twice is harmless


def test_resume_restarts_at_the_first_future_slot_without_replaying_missed_runs(api: Api, db: Any) -> None:
    at = pinned()
    job = api.create(schedule="* * * * * *", timezone="UTC")  # every second: a paused second is a missed run
    api.call("POST", f"/jobs/{job['id']}/pause")
    use_clock((at + timedelta(seconds=30)).timestamp)  # resumed half a minute later: 30 slots went by
    reply = api.call("POST", f"/jobs/{job['id']}/resume")

    assert reply.status == 200
    resumed = reply.body
    assert resumed["status"] == "active"
    next_ms = ms(resumed["next_run_at"])
    assert next_ms == to_ms(at.replace(microsecond=0) + timedelta(seconds=31))  # the first second after resuming
    assert score_of(api.index, job_member(job["id"])) == next_ms
    assert db.execute("SELECT count(*) FROM executions WHERE job_id = %s", (job["id"],)).fetchone()[0] == 0


def test_paused_job_rescheduled_stays_paused(api: Api) -> None:
    job = api.create()
    api.call("POST", f"/jobs/{job['id']}/pause")
    updated = api.call("PATCH", f"/jobs/{job['id']}", {"schedule": "0 0 5 * * *"}).body
    assert updated["status"] == "paused"
    assert updated["version"] == 2
    assert score_of(api.index, job_member(job["id"])) is None


def test_delete_soft_deletes_unindexes_and_keeps_history(api: Api, db: Any, services: Services) -> None:
    job = api.create()
    execution = api.call("POST", f"/jobs/{job['id']}/run").body

    reply = api.call("DELETE", f"/jobs/{job['id']}")

    assert reply.status == 204 and reply.body is None
    assert api.call("GET", f"/jobs/{job['id']}").status == 404
    assert api.call("DELETE", f"/jobs/{job['id']}").status == 404
    assert api.call("GET", f"/jobs/{job['id']}/executions").status == 404
    assert score_of(api.index, job_member(job["id"])) is None
    assert indexed_spec(services, api.index, job["id"]) is None
    assert job["id"] not in [item["id"] for item in api.call("GET", "/jobs").body["items"]]
    stored = stored_job(db, job["id"])
    assert stored["status"] == "deleted" and stored["deleted_at"] is not None
    assert api.call("GET", f"/executions/{execution['id']}").status == 200


def test_completed_job_shows_no_next_run_and_can_be_given_a_new_schedule(api: Api, db: Any) -> None:
    job = api.create()
    # What the poller records once a job's schedule has no run left (a one-time at() that has fired).
    db.execute("UPDATE jobs SET status = 'completed', next_run_at = NULL WHERE id = %s", (job["id"],))

    shown = api.call("GET", f"/jobs/{job['id']}").body
    assert shown["status"] == "completed"
    assert shown["next_run_at"] is None
    assert shown["next_fire_times"] == []
    assert api.call("POST", f"/jobs/{job['id']}/pause").body["error"]["code"] == "conflict"
    assert api.call("POST", f"/jobs/{job['id']}/resume").status == 409

    revived = api.call("PATCH", f"/jobs/{job['id']}", {"schedule": "0 0 4 * * *"}).body
    assert revived["status"] == "active"
    assert score_of(api.index, job_member(job["id"])) == ms(revived["next_run_at"])


# ---------------------------------------------------------------- run now and history

def test_run_queues_a_manual_execution_for_the_poller(api: Api) -> None:
    at = pinned()
    job = api.create()
    api.call("POST", f"/jobs/{job['id']}/pause")  # a paused job can still be fired by hand
    reply = api.call("POST", f"/jobs/{job['id']}/run")

    assert reply.status == 202, reply.body
    execution = reply.body
    assert execution["job_id"] == job["id"]
    assert execution["trigger"] == "manual"
    assert execution["status"] == "queued"
    assert execution["attempt_count"] == 0
    score = score_of(api.index, execution_member(execution["id"], 1))
    assert score == to_ms(at)
    assert score == ms(execution["scheduled_for"])
    listed = api.call("GET", f"/jobs/{job['id']}/executions").body["items"]
    assert [item["id"] for item in listed] == [execution["id"]]


def test_executions_are_listed_newest_first_in_pages(api: Api, db: Any) -> None:
    base = datetime(2025, 1, 1, tzinfo=timezone.utc)
    use_clock(lambda: base.timestamp())  # one clock: the job is created at the fixed time its runs follow
    job = api.create()
    ids = [executions_store.insert_manual(db, api.tenant_id, job["id"], base + timedelta(minutes=i)) for i in range(5)]

    first = api.call("GET", f"/jobs/{job['id']}/executions", query={"limit": "3"}).body
    second = api.call("GET", f"/jobs/{job['id']}/executions",
                      query={"limit": "3", "cursor": first["next_cursor"]}).body

    assert [e["id"] for e in first["items"] + second["items"]] == list(reversed(ids))
    assert second["next_cursor"] is None
    assert first["items"][0]["scheduled_for"] == "2025-01-01T00:04:00.000Z"


def test_execution_shows_its_attempts_with_a_truncated_body(api: Api, db: Any) -> None:
    started = datetime(2025, 1, 1, 12, 0, 0, 250000, tzinfo=timezone.utc)
    use_clock(lambda: started.timestamp())  # one clock: the API's, the run's and its attempt's are the fixed one
    job = api.create()
    execution_id = executions_store.insert_manual(db, api.tenant_id, job["id"], started)
    assert isinstance(executions_store.start_attempt(db, execution_id, 1), StartedExecution)
    record = attempts_store.AttemptRecord(1, started, 87, 503, "x" * 5000, "HTTP 503")
    finished = attempts_store.Finished(execution_id, record, RunStatus.RETRYING, started + timedelta(seconds=30))
    assert attempts_store.finish_attempt(db, finished) == attempts_store.Ended(True)

    reply = api.call("GET", f"/executions/{execution_id}")

    assert reply.status == 200, reply.body
    execution = reply.body
    assert execution["status"] == "retrying"
    assert execution["attempt_count"] == 1
    assert execution["next_attempt_at"] == "2025-01-01T12:00:30.250Z"
    assert execution["last_error"] == "HTTP 503"
    assert execution["attempts"] == [{
        "number": 1, "started_at": "2025-01-01T12:00:00.250Z", "duration_ms": 87, "status_code": 503,
        "error": "HTTP 503", "response_body": "x" * 1024, "response_truncated": True, "output": None,
    }]


# ---------------------------------------------------------------- tenants

def test_another_tenants_job_and_history_are_not_found(api: Api, other: Api, db: Any) -> None:
    theirs = other.create(name="theirs")
    execution = other.call("POST", f"/jobs/{theirs['id']}/run").body
    job_path = f"/jobs/{theirs['id']}"

    attempts = [
        api.call("GET", job_path), api.call("PATCH", job_path, {"name": "mine now"}), api.call("DELETE", job_path),
        api.call("POST", f"{job_path}/pause"), api.call("POST", f"{job_path}/resume"),
        api.call("POST", f"{job_path}/run"), api.call("GET", f"{job_path}/executions"),
        api.call("GET", f"/executions/{execution['id']}"),
    ]

    for reply in attempts:
        assert reply.status == 404, reply.body
        assert reply.body["error"]["code"] == "not_found"
    assert api.call("GET", "/jobs").body["items"] == []
    untouched = other.call("GET", job_path).body
    assert (untouched["name"], untouched["status"]) == ("theirs", "active")
    assert len(other.call("GET", f"{job_path}/executions").body["items"]) == 1


def test_a_cursor_from_another_tenant_reveals_nothing(api: Api, other: Api) -> None:
    for i in range(3):
        other.create(name=f"theirs-{i}")
    cursor = other.call("GET", "/jobs", query={"limit": "1"}).body["next_cursor"]
    assert api.call("GET", "/jobs", query={"cursor": cursor}).body == {"items": [], "next_cursor": None}


# ---------------------------------------------------------------- schedule preview and the OpenAPI document

def test_preview_lists_fire_times_in_utc_and_local_time_across_dst(api: Api) -> None:
    body = {"schedule": "0 0 9 * * MON-FRI", "timezone": "America/New_York", "count": 3,
            "after": "2024-03-08T00:00:00Z"}
    reply = api.call("POST", "/schedules/preview", body)

    assert reply.status == 200, reply.body
    assert reply.body["schedule"] == parse_schedule("0 0 9 * * MON-FRI").canonical
    assert reply.body["timezone"] == "America/New_York"
    assert reply.body["description"]
    assert reply.body["fire_times"] == [
        {"utc": "2024-03-08T14:00:00.000Z", "local": "2024-03-08T09:00:00.000-05:00"},
        {"utc": "2024-03-11T13:00:00.000Z", "local": "2024-03-11T09:00:00.000-04:00"},
        {"utc": "2024-03-12T13:00:00.000Z", "local": "2024-03-12T09:00:00.000-04:00"},
    ]


def test_the_preview_event_as_shipped_returns_five_times(api: Api, handler: Callable[[str], Any]) -> None:
    reply = Api._reply(handler("api")(load_event("api_preview_schedule.json"), None))
    assert reply.status == 200, reply.body
    assert len(reply.body["fire_times"]) == 5
    assert all(t["local"].endswith(("-05:00", "-04:00")) for t in reply.body["fire_times"])


def test_openapi_document_is_generated_from_the_routes(api: Api) -> None:
    reply = api.call("GET", "/openapi.json", token=None)

    assert reply.status == 200
    document = reply.body
    paths = document["paths"]
    assert set(paths["/jobs"]) == {"get", "post"}
    assert set(paths["/jobs/{job_id}"]) == {"get", "patch", "delete"}
    for action in ("pause", "resume", "run"):
        assert set(paths[f"/jobs/{{job_id}}/{action}"]) == {"post"}
    assert set(paths["/jobs/{job_id}/executions"]) == {"get"}
    assert set(paths["/executions/{execution_id}"]) == {"get"}
    assert set(paths["/schedules/preview"]) == {"post"}
    assert set(paths["/jobs"]["post"]["responses"]) == {"201", "400", "401", "403", "409", "422", "429", "503"}
    assert document["components"]["schemas"]["JobCreate"]["additionalProperties"] is False
    assert document["components"]["securitySchemes"]["apiKey"]["scheme"] == "bearer"


# ---------------------------------------------------------------- run policies

def test_policies_default_and_reach_the_due_index(api: Api, services: Services) -> None:
    job = api.create()
    assert (job["overlap"], job["catchup"], job["catchup_window_seconds"]) == ("allow", "latest", 300)
    custom = api.create(overlap="queue_one", catchup="all", catchup_window_seconds=30)
    assert (custom["overlap"], custom["catchup"], custom["catchup_window_seconds"]) == ("queue_one", "all", 30)
    spec = indexed_spec(services, api.index, custom["id"])
    assert spec is not None and (spec["ca"], spec["cw"]) == ("all", 30)


def test_patching_a_policy_updates_the_job_and_its_index_entry(api: Api, services: Services) -> None:
    job = api.create()
    patched = api.call("PATCH", f"/jobs/{job['id']}", {"overlap": "skip", "catchup_window_seconds": 0}).body
    assert (patched["overlap"], patched["catchup_window_seconds"], patched["version"]) == ("skip", 0, job["version"])
    spec = indexed_spec(services, api.index, job["id"])
    assert spec is not None and spec["cw"] == 0
    assert api.call("GET", f"/jobs/{job['id']}").body["overlap"] == "skip"


def test_bad_policy_values_are_rejected_naming_the_field(api: Api) -> None:
    for field, value in (("overlap", "sometimes"), ("catchup", "none"), ("catchup_window_seconds", -1)):
        reply = api.call("POST", "/jobs", job_body(**{field: value}))
        assert reply.status == 400 and reply.body["error"]["field"] == field, reply.body


def test_a_sub_minute_schedule_catches_up_at_most_10080_of_its_slots(api: Api) -> None:
    """An every-second job with a week's window replays 604,800 runs after an outage: refused."""
    assert api.create(schedule="* * * * * *", catchup="all", catchup_window_seconds=10_080)
    for schedule, window in (("* * * * * *", 10_081), ("rate(10 seconds)", 100_801), ("*/2 * * 1 * *", 86_400)):
        reply = api.call("POST", "/jobs", job_body(schedule=schedule, catchup_window_seconds=window))
        assert reply.status == 400 and reply.body["error"]["field"] == "catchup_window_seconds", reply.body
        assert "at most" in reply.body["error"]["message"]
    assert api.create(schedule="rate(10 seconds)", catchup_window_seconds=100_800)
    weekly_window = api.create(schedule="* * * * *", catchup_window_seconds=604_800)  # a week of a per-minute job
    to_every_second = api.call("PATCH", f"/jobs/{weekly_window['id']}", {"schedule": "every second"})
    assert to_every_second.status == 400 and to_every_second.body["error"]["field"] == "catchup_window_seconds"
    every_second = api.create(schedule="* * * * * *")
    wider = api.call("PATCH", f"/jobs/{every_second['id']}", {"catchup_window_seconds": 86_400})
    assert wider.status == 400 and wider.body["error"]["field"] == "catchup_window_seconds"
    assert api.call("GET", f"/jobs/{every_second['id']}").body["catchup_window_seconds"] == 300


def test_deleting_a_job_skips_its_runs_not_started_yet(api: Api, db: Any, services: Services) -> None:
    job = api.create()
    queued = api.call("POST", f"/jobs/{job['id']}/run").body
    assert api.call("DELETE", f"/jobs/{job['id']}").status == 204
    shown = api.call("GET", f"/executions/{queued['id']}").body
    assert (shown["status"], shown["last_error"]) == ("skipped", "skipped: the job was deleted")
    assert executions_store.start_attempt(db, queued["id"], 1) == "duplicate"
