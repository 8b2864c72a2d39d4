"""Tenant quotas through the real API handler and the admin operation that overrides them."""
from __future__ import annotations

import threading
from datetime import datetime, timezone
from typing import Any, Callable

import pytest

from tests.integration.api_client import Api, job_body
from tickwork.errors import QuotaExceededError
from tickwork.scope import Scope
from tickwork.store.secrets import PgKeyStore
from tickwork.store.tenants import create_api_key, create_tenant
from tickwork.tenant import jobs
from tickwork.models import JobDraft
from tickwork.wiring import Services

Handler = Callable[[str], Callable[[dict[str, Any], Any], Any]]
EVERY_SECOND = "* * * * * *"


def set_quotas(handler: Handler, tenant: str, **quotas: Any) -> dict[str, Any]:
    return handler("api")({"admin": "set-quotas", "tenant": tenant, **quotas}, None)


def assert_quota(reply: Any, field: str, limit: int) -> None:
    assert reply.status == 403, reply.body
    error = reply.body["error"]
    assert (error["code"], error["field"]) == ("quota_exceeded", field)
    assert str(limit) in error["message"] and field in error["message"]


def live_jobs(db: Any, tenant_id: str) -> int:
    return db.execute("SELECT count(*) FROM jobs WHERE tenant_id = %s AND status <> 'deleted'",
                      (tenant_id,)).fetchone()[0]


def test_max_jobs_refuses_the_job_past_it_and_counts_deleted_jobs_out(api: Api, handler: Handler, db: Any) -> None:
    assert set_quotas(handler, api.tenant_id, max_jobs=2)["quotas"]["max_jobs"] == 2
    first = api.create()
    api.create()
    assert_quota(api.call("POST", "/jobs", job_body()), "max_jobs", 2)
    assert live_jobs(db, api.tenant_id) == 2
    # Paused jobs count; deleted ones do not.
    assert api.call("POST", f"/jobs/{first['id']}/pause").status == 200
    assert_quota(api.call("POST", "/jobs", job_body()), "max_jobs", 2)
    assert api.call("DELETE", f"/jobs/{first['id']}").status == 204
    assert api.call("POST", "/jobs", job_body()).status == 201


def test_min_interval_holds_on_create_and_update(api: Api, handler: Handler) -> None:
    set_quotas(handler, api.tenant_id, min_interval_seconds=60)
    assert_quota(api.call("POST", "/jobs", job_body(schedule="*/30 * * * * *")), "min_interval_seconds", 60)
    job = api.create(schedule="0 * * * * *")
    assert_quota(api.call("PATCH", f"/jobs/{job['id']}", {"schedule": "rate(10 seconds)"}),
                 "min_interval_seconds", 60)
    assert api.call("GET", f"/jobs/{job['id']}").body["schedule"] == job["schedule"]
    # A change that is not the schedule's is not held to it.
    assert api.call("PATCH", f"/jobs/{job['id']}", {"name": "renamed"}).status == 200


def test_an_interval_below_the_deployment_minimum_stays_a_400(api: Api, handler: Handler) -> None:
    set_quotas(handler, api.tenant_id, min_interval_seconds=1)
    reply = api.call("POST", "/jobs", job_body(schedule="*/10 * * * * *"))
    assert reply.status == 201, reply.body


def test_max_runs_per_minute_sums_the_active_schedules(api: Api, handler: Handler) -> None:
    set_quotas(handler, api.tenant_id, max_runs_per_minute=80)
    fast = api.create(schedule=EVERY_SECOND)  # 60
    assert_quota(api.call("POST", "/jobs", job_body(schedule="*/2 * * * * *")), "max_runs_per_minute", 80)
    slow = api.create(schedule="*/3 * * * * *")  # 20: 80 in all
    assert_quota(api.call("PATCH", f"/jobs/{slow['id']}", {"schedule": "*/2 * * * * *"}), "max_runs_per_minute", 80)
    # A paused job counts for nothing, so another fast one fits; resuming the first is then refused.
    assert api.call("POST", f"/jobs/{fast['id']}/pause").status == 200
    api.create(schedule="*/2 * * * * *")  # 30: 50 in all
    assert_quota(api.call("POST", f"/jobs/{fast['id']}/resume"), "max_runs_per_minute", 80)
    assert api.call("GET", f"/jobs/{fast['id']}").body["status"] == "paused"
    assert api.call("POST", "/jobs", job_body(schedule="0 30 2 * * *")).status == 201


def test_quotas_are_per_tenant(api: Api, handler: Handler, db: Any) -> None:
    other_id = create_tenant(db, "tenant-b")
    other = Api(api.handler, create_api_key(db, other_id), other_id, api.index)
    set_quotas(handler, api.tenant_id, max_jobs=1)
    api.create()
    assert_quota(api.call("POST", "/jobs", job_body()), "max_jobs", 1)
    assert other.call("POST", "/jobs", job_body()).status == 201
    assert other.call("POST", "/jobs", job_body()).status == 201


def test_the_deployment_defaults_come_from_the_settings(api: Api, services: Services) -> None:
    from tests.integration.api_client import use_settings

    use_settings(services, allow_private_targets=False, max_jobs=1, max_runs_per_minute=5)
    assert_quota(api.call("POST", "/jobs", job_body(schedule=EVERY_SECOND)), "max_runs_per_minute", 5)
    api.create()
    assert_quota(api.call("POST", "/jobs", job_body()), "max_jobs", 1)


@pytest.mark.parametrize("quota,limit", [("max_jobs", 3), ("max_runs_per_minute", 180)])
def test_quotas_hold_under_concurrent_creates(api: Api, services: Services, handler: Handler, db: Any,
                                              quota: str, limit: int) -> None:
    """Eight creates at once, each in its own thread and connection (as eight API environments would):
    exactly as many succeed as the quota allows. Every job runs every second (60 runs a minute)."""
    set_quotas(handler, api.tenant_id, **{quota: limit})
    draft = JobDraft.from_dict({**job_body(schedule=EVERY_SECOND), "start_at": None, "end_at": None,
                                "retry": {"strategy": "exponential", "max_attempts": 3, "delay_seconds": 10}})
    with services.db.connection() as conn:  # the first data key, as the API's authentication makes it
        services.keyring.ensure(PgKeyStore(conn))
    start, outcomes = threading.Barrier(8), []
    now = datetime.now(timezone.utc)

    def create() -> None:
        scope = Scope(services.db, api.index, services.settings, api.tenant_id, now, services.keyring)
        start.wait(timeout=10)
        try:
            jobs.create_job(scope, draft)
            outcomes.append("created")
        except QuotaExceededError as exc:
            outcomes.append(exc.field)

    threads = [threading.Thread(target=create) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(outcomes) == ["created"] * 3 + [quota] * 5
    assert live_jobs(db, api.tenant_id) == 3


# ---------------------------------------------------------------- the admin operation

def test_set_quotas_by_name_and_back_to_the_default(api: Api, handler: Handler, db: Any) -> None:
    db.execute("UPDATE tenants SET name = 'acme' WHERE id = %s", (api.tenant_id,))
    result = set_quotas(handler, "acme", max_jobs=5, max_runs_per_minute=50, max_runs_in_flight=7,
                        max_storage_bytes=1 << 40, max_replays_queued=0)
    assert result == {"tenant_id": api.tenant_id,
                      "quotas": {"max_jobs": 5, "min_interval_seconds": 1, "max_runs_per_minute": 50,
                                 "max_history_rows": 1_000_000, "max_runs_in_flight": 7, "max_storage_bytes": 1 << 40,
                                 "max_replays_queued": 0},
                      "overrides": {"max_jobs": 5, "min_interval_seconds": None, "max_runs_per_minute": 50,
                                    "max_history_rows": None, "max_runs_in_flight": 7, "max_storage_bytes": 1 << 40,
                                    "max_replays_queued": 0}}
    # Absent: unchanged; null: the deployment's default again.
    result = set_quotas(handler, api.tenant_id, max_jobs=None, max_history_rows=200, max_runs_in_flight=None,
                        max_storage_bytes=None, max_replays_queued=None)
    assert result["quotas"] == {"max_jobs": 1000, "min_interval_seconds": 1, "max_runs_per_minute": 50,
                                "max_history_rows": 200, "max_runs_in_flight": 500,
                                "max_storage_bytes": 256 * 1024 * 1024, "max_replays_queued": 36_000}


@pytest.mark.parametrize("fields,field", [
    ({"max_jobs": -1}, "max_jobs"),
    ({"max_jobs": "10"}, "max_jobs"),
    ({"max_jobs": True}, "max_jobs"),
    ({"max_jobs": 1.5}, "max_jobs"),
    ({"min_interval_seconds": 0}, "min_interval_seconds"),
    ({"max_runs_per_minute": 10**12}, "max_runs_per_minute"),
    ({"max_history_rows": -5}, "max_history_rows"),
    ({"max_runs_in_flight": 0}, "max_runs_in_flight"),
    ({"max_storage_bytes": -1}, "max_storage_bytes"),
    ({"max_storage_bytes": (1 << 40) + 1}, "max_storage_bytes"),
    ({"max_replays_queued": -1}, "max_replays_queued"),
    ({"max_job": 5}, "max_job"),
])
def test_bad_quotas_are_a_400_naming_the_field(api: Api, handler: Handler, db: Any,
                                               fields: dict[str, Any], field: str) -> None:
    result = set_quotas(handler, api.tenant_id, **fields)
    assert result["statusCode"] == 400 and result["error"]["field"] == field, result
    assert db.execute("SELECT max_jobs, min_interval_seconds, max_runs_per_minute, max_history_rows,"
                      " max_runs_in_flight, max_replays_queued FROM tenants WHERE id = %s",
                      (api.tenant_id,)).fetchone() == (None, None, None, None, None, None)


@pytest.mark.parametrize("tenant", [None, "", "no-such-tenant", "00000000-0000-0000-0000-000000000000"])
def test_set_quotas_needs_a_known_tenant(api: Api, handler: Handler, tenant: Any) -> None:
    result = handler("api")({"admin": "set-quotas", "tenant": tenant, "max_jobs": 1}, None)
    assert result["error"]["field"] == "tenant"
    assert result["statusCode"] == (400 if not tenant else 404)
