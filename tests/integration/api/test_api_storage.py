"""The per-tenant storage budget through the real API handler, the admin operation and the maintenance pass, on
real Postgres: audit entries and stored Idempotency-Key answers count in it as they are written and pruned, a
tenant past it loses its own oldest entries (never a change or a delete), and the pass recounts what a release
without the budget wrote."""
from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

import pytest

from tests.integration.api_client import Api, Ticking, job_body, use_clock, use_settings
from tickwork.ops import storage
from tickwork.ops.maintenance import run_maintenance
from tickwork.store import storage as storage_store
from tickwork.store.tenants import create_api_key, create_tenant
from tickwork.wiring import Services
from tickwork.wiring import services as current_services

Handler = Callable[[str], Callable[[dict[str, Any], Any], Any]]
START = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
# Within the retention (30 days) of every entry made here: only the budget prunes.
PASS = START + timedelta(hours=1)


@pytest.fixture
def other(api: Api, db: Any) -> Api:
    tenant_id = create_tenant(db, "tenant-b")
    return Api(api.handler, create_api_key(db, tenant_id, name="b-key"), tenant_id, api.index)


def audit_ids(db: Any, tenant_id: str) -> list[str]:
    """The tenant's entries, oldest first."""
    return [r[0] for r in db.execute("SELECT id::text FROM audit_events WHERE tenant_id = %s ORDER BY at, id",
                                     (tenant_id,))]


def keys(db: Any, tenant_id: str) -> list[str]:
    return [r[0] for r in db.execute("SELECT key FROM idempotency_keys WHERE tenant_id = %s ORDER BY created_at",
                                     (tenant_id,))]


def counted(db: Any, tenant_id: str) -> int:
    """The tenant's usage as the pass last folded it, both kinds together."""
    return sum(b for b, _ in storage_store.usage(db, tenant_id).values())


def recount(db: Any, tenant_id: str) -> int:
    """The tenant's usage measured from its rows now."""
    audit = db.execute(f"SELECT coalesce(sum({storage_store.AUDIT_BYTES}), 0) FROM audit_events WHERE tenant_id = %s",
                       (tenant_id,)).fetchone()[0]
    idem = db.execute(f"SELECT coalesce(sum({storage_store.IDEMPOTENCY_BYTES}), 0) FROM idempotency_keys"
                      " WHERE tenant_id = %s", (tenant_id,)).fetchone()[0]
    return int(audit) + int(idem)


def set_budget(handler: Handler, tenant_id: str, budget: int | None) -> None:
    reply = handler("api")({"admin": "set-quotas", "tenant": tenant_id, "max_storage_bytes": budget}, None)
    assert reply["quotas"]["max_storage_bytes"] == (budget if budget is not None else 256 * 1024 * 1024), reply


def test_a_tenant_past_its_budget_still_changes_and_deletes_jobs_and_loses_its_oldest_entries_first(
    api: Api, other: Api, services: Services, db: Any, handler: Handler,
) -> None:
    use_clock(Ticking(START))
    assert api.call("POST", "/jobs", job_body(name="keyed"), headers={"Idempotency-Key": "oldest"}).status == 201
    theirs = other.create(name="theirs")
    assert other.call("PATCH", f"/jobs/{theirs['id']}", {"description": "b" * 400}).status == 200
    job = api.create(name="busy")
    for n in range(12):  # each entry ~1.3 KB: a 400-character description before and after
        assert api.call("PATCH", f"/jobs/{job['id']}", {"description": f"{n:03d}" + "d" * 397}).status == 200
    run_maintenance(services, PASS)
    used = counted(db, api.tenant_id)
    assert used == recount(db, api.tenant_id) > 10_000
    before, b_before = audit_ids(db, api.tenant_id), audit_ids(db, other.tenant_id)

    budget = used // 2
    set_budget(handler, api.tenant_id, budget)
    # At its budget and past it, every change and delete is made (and recorded) as before.
    assert api.call("PATCH", f"/jobs/{job['id']}", {"description": "last" + "e" * 396}).status == 200
    assert api.call("DELETE", f"/jobs/{job['id']}").status == 204
    newest = audit_ids(db, api.tenant_id)[-2:]

    report = run_maintenance(services, PASS + timedelta(minutes=1))
    left = audit_ids(db, api.tenant_id)
    assert report.storage_pruned == len(before) + 2 - len(left) + 1 and keys(db, api.tenant_id) == []
    # Oldest first, down to 90% of the budget: what is left is the newest entries, the delete's included.
    assert left == (before + newest)[-len(left):] and left[-2:] == newest
    assert counted(db, api.tenant_id) == recount(db, api.tenant_id) <= budget * storage.LOW_WATER
    assert audit_ids(db, other.tenant_id) == b_before and len(b_before) == 2
    assert api.call("GET", "/audit", query={"job_id": job["id"], "limit": "1"}).body["items"][0]["action"] == \
        "job.deleted"


def test_a_tenant_keeps_its_newest_idempotency_keys_up_to_the_count_cap(
    api: Api, other: Api, services: Services, db: Any,
) -> None:
    use_settings(services, max_idempotency_keys=3)
    use_clock(Ticking(START))
    made = {}
    for n in range(5):
        reply = api.call("POST", "/jobs", job_body(name=f"job-{n}"), headers={"Idempotency-Key": f"k{n}"})
        made[f"k{n}"] = reply.body["id"]
    for n in range(2):
        assert other.call("POST", "/jobs", job_body(name=f"b-{n}"), headers={"Idempotency-Key": f"k{n}"}).status == 201

    report = run_maintenance(current_services(), PASS)
    assert report.idempotency_keys_capped == 2
    assert keys(db, api.tenant_id) == ["k2", "k3", "k4"] and keys(db, other.tenant_id) == ["k0", "k1"]
    assert counted(db, api.tenant_id) == recount(db, api.tenant_id)
    kept = api.call("POST", "/jobs", job_body(name="job-4"), headers={"Idempotency-Key": "k4"})
    assert kept.headers["Idempotent-Replayed"] == "true" and kept.body["id"] == made["k4"]
    # A key dropped at the cap is forgotten: its retry is a new request (docs/api.md says so).
    dropped = api.call("POST", "/jobs", job_body(name="job-0b"), headers={"Idempotency-Key": "k0"})
    assert dropped.status == 201 and "Idempotent-Replayed" not in dropped.headers


def test_the_pass_recounts_what_a_release_without_the_budget_wrote_and_deleted(
    api: Api, services: Services, db: Any,
) -> None:
    use_clock(Ticking(START))
    job = api.create(name="counted")
    assert api.call("POST", "/jobs", job_body(name="keyed"), headers={"Idempotency-Key": "k"}).status == 201
    run_maintenance(services, PASS)
    assert counted(db, api.tenant_id) == recount(db, api.tenant_id) > 0
    # What the release before this one does: audit entries and keys written with no note of their bytes, and
    # its retention deleting a counted entry without one.
    for n in range(3):
        db.execute("INSERT INTO audit_events (id, tenant_id, at, action, job_id, target, changes) VALUES"
                   " (%s, %s, %s, 'job.updated', %s, 'counted', %s)",
                   (str(uuid.uuid4()), api.tenant_id, START + timedelta(minutes=n), job["id"],
                    '[{"field": "description", "before": null, "after": "' + "x" * 500 + '"}]'))
    db.execute("INSERT INTO idempotency_keys (tenant_id, key, fingerprint, created_at, status_code, body)"
               " VALUES (%s, 'old-release', '\\x00', %s, 201, %s)", (api.tenant_id, START, "{}" * 100))
    db.execute("DELETE FROM audit_events WHERE id = %s", (audit_ids(db, api.tenant_id)[0],))
    drifted = counted(db, api.tenant_id)

    run_maintenance(services, PASS + timedelta(minutes=1))  # counted an hour ago at most: folds only
    assert counted(db, api.tenant_id) == drifted != recount(db, api.tenant_id)
    run_maintenance(services, PASS + storage.RECOUNT_EVERY + timedelta(minutes=1))
    assert counted(db, api.tenant_id) == recount(db, api.tenant_id)
    entries = dict((k, n) for k, (_, n) in storage_store.usage(db, api.tenant_id).items())
    assert entries == {"audit": len(audit_ids(db, api.tenant_id)), "idempotency": 2}


def test_one_tenant_failing_its_budget_step_leaves_the_others_held_to_theirs(
    api: Api, other: Api, services: Services, db: Any, handler: Handler, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The step is a loop over tenants: a tenant whose entries cannot be read is logged and passed over."""
    use_clock(Ticking(START))
    for tenant in (api, other):
        job = tenant.create(name="busy")
        for n in range(6):
            assert tenant.call("PATCH", f"/jobs/{job['id']}", {"description": f"{n}" + "d" * 399}).status == 200
        set_budget(handler, tenant.tenant_id, 2_000)
    real = storage_store.oldest

    def broken(conn: Any, tenant_id: str, limit: int) -> list[storage_store.Entry]:
        if tenant_id == api.tenant_id:
            raise RuntimeError("injected: this tenant's entries cannot be read")
        return real(conn, tenant_id, limit)

    monkeypatch.setattr(storage_store, "oldest", broken)
    report = run_maintenance(services, PASS)
    assert report.storage_failed == 1 and report.storage_pruned > 0
    assert counted(db, other.tenant_id) <= 2_000 * storage.LOW_WATER < counted(db, api.tenant_id)
