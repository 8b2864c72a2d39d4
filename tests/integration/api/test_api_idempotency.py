"""Idempotency-Key on POST /jobs and POST /jobs/{id}/run, through the real handler and Postgres."""
from __future__ import annotations

import json
import threading
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from tests.integration.api_client import Api, job_body, use_clock
from tests.support import FakeClock
from tickwork.api import views
from tickwork.errors import ConflictError, IdempotencyKeyReusedError
from tickwork.ops.maintenance import run_maintenance
from tickwork.scope import Scope
from tickwork.store.secrets import PgKeyStore
from tickwork.store.tenants import create_api_key, create_tenant
from tickwork.tenant import idempotency, jobs
from tickwork.models import JobDraft
from tickwork.wiring import Services

T0 = datetime(2031, 5, 6, 7, 8, 9, tzinfo=timezone.utc)
KEY = "3f0c1a52-9a5e-4c43-9f0e-2f1b8c7d6e5a"


def with_key(key: str = KEY) -> dict[str, str]:
    return {"Idempotency-Key": key}


def count(db: Any, table: str, tenant_id: str) -> int:
    return db.execute(f"SELECT count(*) FROM {table} WHERE tenant_id = %s", (tenant_id,)).fetchone()[0]


def test_a_retried_create_replays_the_first_answer_and_creates_nothing(api: Api, db: Any) -> None:
    first = api.call("POST", "/jobs", job_body(), headers=with_key())
    assert first.status == 201 and "Idempotent-Replayed" not in first.headers
    # The same body with other key order and spacing is the same request.
    reordered = json.dumps(dict(reversed(list(job_body().items()))), indent=2)
    again = api.call("POST", "/jobs", raw_body=reordered, headers=with_key())
    assert again.status == 201 and again.raw == first.raw
    assert again.headers["Idempotent-Replayed"] == "true"
    assert count(db, "jobs", api.tenant_id) == 1


def test_the_same_key_with_another_body_is_a_422(api: Api, db: Any) -> None:
    assert api.call("POST", "/jobs", job_body(), headers=with_key()).status == 201
    reused = api.call("POST", "/jobs", job_body(name="other"), headers=with_key())
    assert reused.status == 422, reused.body
    assert reused.body["error"]["code"] == "idempotency_key_reused"
    assert reused.body["error"]["field"] == "Idempotency-Key"
    job_id = api.call("GET", "/jobs").body["items"][0]["id"]
    # The same key on another route is another request too.
    assert api.call("POST", f"/jobs/{job_id}/run", headers=with_key()).status == 422
    assert count(db, "jobs", api.tenant_id) == 1 and count(db, "executions", api.tenant_id) == 0


def test_a_retried_manual_run_runs_once(api: Api, db: Any) -> None:
    job = api.create()
    first = api.call("POST", f"/jobs/{job['id']}/run", headers=with_key())
    again = api.call("POST", f"/jobs/{job['id']}/run", headers=with_key())
    assert (first.status, again.status) == (202, 202) and again.raw == first.raw
    assert again.headers["Idempotent-Replayed"] == "true"
    assert count(db, "executions", api.tenant_id) == 1
    # Without a key, or with another, each call is a run.
    assert api.call("POST", f"/jobs/{job['id']}/run").status == 202
    assert api.call("POST", f"/jobs/{job['id']}/run", headers=with_key("another")).status == 202
    assert count(db, "executions", api.tenant_id) == 3


def test_an_error_is_not_kept_so_the_corrected_request_may_reuse_the_key(api: Api, db: Any) -> None:
    bad = api.call("POST", "/jobs", job_body(schedule="not a schedule"), headers=with_key())
    assert bad.status == 400
    good = api.call("POST", "/jobs", job_body(), headers=with_key())
    assert good.status == 201 and "Idempotent-Replayed" not in good.headers
    missing = api.call("POST", "/jobs/00000000-0000-0000-0000-000000000000/run", headers=with_key("run-1"))
    assert missing.status == 404
    assert count(db, "idempotency_keys", api.tenant_id) == 1


def test_keys_are_scoped_to_the_tenant(api: Api, db: Any) -> None:
    other_id = create_tenant(db, "tenant-b")
    other = Api(api.handler, create_api_key(db, other_id), other_id, api.index)
    mine = api.call("POST", "/jobs", job_body(), headers=with_key())
    theirs = other.call("POST", "/jobs", job_body(name="theirs"), headers=with_key())
    assert (mine.status, theirs.status) == (201, 201) and "Idempotent-Replayed" not in theirs.headers
    assert theirs.body["id"] != mine.body["id"]
    assert count(db, "jobs", api.tenant_id) == 1 and count(db, "jobs", other_id) == 1


def test_a_key_is_kept_24_hours_then_pruned(api: Api, services: Services, db: Any) -> None:
    clock = FakeClock(T0)
    use_clock(clock.time)
    first = api.call("POST", "/jobs", job_body(start_at="2032-01-01T00:00:00Z"), headers=with_key())
    clock.sleep(24 * 3600 - 1)
    assert api.call("POST", "/jobs", job_body(start_at="2032-01-01T00:00:00Z"),
                    headers=with_key()).headers.get("Idempotent-Replayed") == "true"
    run_maintenance(services, T0 + timedelta(hours=24) - timedelta(seconds=1))
    assert count(db, "idempotency_keys", api.tenant_id) == 1
    report = run_maintenance(services, T0 + timedelta(hours=24, seconds=1))
    assert report.idempotency_keys_pruned == 1 and count(db, "idempotency_keys", api.tenant_id) == 0
    clock.sleep(2)
    fresh = api.call("POST", "/jobs", job_body(start_at="2032-01-01T00:00:00Z"), headers=with_key())
    assert fresh.status == 201 and fresh.body["id"] != first.body["id"]


def test_an_answer_over_the_cap_is_kept_as_its_id_and_a_retry_reads_the_job_afresh(api: Api, db: Any) -> None:
    """A job with a 64K-character body answers ~66 KB: kept whole, 10,000 keys of such answers were 660 MB."""
    use_clock(FakeClock(T0).time)
    body = job_body(request={"method": "POST", "body": "x" * 65_536})
    first = api.call("POST", "/jobs", body, headers=with_key())
    assert first.status == 201 and len(first.raw.encode()) > idempotency.MAX_ANSWER_BYTES
    kept, answer_bytes = db.execute("SELECT octet_length(body), answer_bytes FROM idempotency_keys").fetchone()
    assert kept < 100 and answer_bytes > idempotency.MAX_ANSWER_BYTES

    again = api.call("POST", "/jobs", body, headers=with_key())
    assert (again.status, again.body) == (201, first.body) and again.headers["Idempotent-Replayed"] == "true"
    # The job as it is now: the retry is told what its first request made, never makes it twice.
    assert api.call("PATCH", f"/jobs/{first.body['id']}", {"name": "renamed"}).status == 200
    renamed = api.call("POST", "/jobs", body, headers=with_key())
    assert (renamed.status, renamed.body["id"], renamed.body["name"]) == (201, first.body["id"], "renamed")
    assert api.call("DELETE", f"/jobs/{first.body['id']}").status == 204
    gone = api.call("POST", "/jobs", body, headers=with_key())
    assert gone.status == 409 and gone.body["error"]["field"] == "Idempotency-Key", gone.body
    assert first.body["id"] in gone.body["error"]["message"] and "too large" in gone.body["error"]["message"]
    assert count(db, "jobs", api.tenant_id) == 1


@pytest.mark.parametrize("key", ["", "x" * 256, "caf\u00e9", "tab\there"])
def test_a_bad_key_is_a_400_naming_the_header(api: Api, db: Any, key: str) -> None:
    reply = api.call("POST", "/jobs", job_body(), headers=with_key(key))
    assert reply.status == 400, reply.body
    assert reply.body["error"]["code"] == "invalid_request"
    assert reply.body["error"]["field"] == "idempotency-key"
    assert key not in reply.body["error"]["message"] or not key
    assert count(db, "jobs", api.tenant_id) == 0


def test_the_longest_printable_key_is_taken(api: Api) -> None:
    assert api.call("POST", "/jobs", job_body(), headers=with_key("~ !" * 85)).status == 201


# ---------------------------------------------------------------- concurrency

def _draft() -> JobDraft:
    body = job_body()
    return JobDraft.from_dict({**body, "start_at": None, "end_at": None,
                               "retry": {"strategy": "exponential", "max_attempts": 3, "delay_seconds": 10}})


def _scope(api: Api, services: Services) -> Scope:
    with services.db.connection() as conn:  # the first data key, as the API's authentication makes it
        services.keyring.ensure(PgKeyStore(conn))
    return Scope(services.db, api.index, services.settings, api.tenant_id, T0, services.keyring)


def test_a_request_still_in_flight_is_a_409_and_then_replays(api: Api, services: Services, db: Any) -> None:
    """The first request is held inside its create (a handshake, not a sleep) while a second one arrives,
    each in its own thread and connection, as two API environments would."""
    entered, release = threading.Event(), threading.Event()
    request_print = idempotency.fingerprint("POST", "/jobs", job_body())
    results: list[Any] = []

    def held() -> idempotency.Answer:
        entered.set()
        assert release.wait(timeout=30)
        return idempotency.Answer(201, views.job_detail(jobs.create_job(_scope(api, services), _draft())).model_dump())

    def first() -> None:
        results.append(idempotency.run_once(services.db, api.tenant_id, KEY, request_print, T0, held))

    thread = threading.Thread(target=first)
    thread.start()
    assert entered.wait(timeout=30)
    with pytest.raises(ConflictError):
        idempotency.run_once(services.db, api.tenant_id, KEY, request_print, T0, _never)
    with pytest.raises(IdempotencyKeyReusedError):
        idempotency.run_once(services.db, api.tenant_id, KEY, b"another request", T0, _never)
    release.set()
    thread.join(timeout=30)
    (answer,) = results
    replay = idempotency.run_once(services.db, api.tenant_id, KEY, request_print, T0, _never)
    assert replay == idempotency.Answer(201, answer.body, replayed=True)
    assert count(db, "jobs", api.tenant_id) == 1


def _never() -> idempotency.Answer:
    raise AssertionError("a request with a known key must not run")


def test_two_concurrent_posts_with_one_key_create_one_job(api: Api, services: Services, db: Any) -> None:
    request_print = idempotency.fingerprint("POST", "/jobs", job_body())
    for attempt in range(5):
        key, start, outcomes = f"race-{attempt}", threading.Barrier(2), []

        def post() -> None:
            start.wait(timeout=10)
            try:
                answer = idempotency.run_once(
                    services.db, api.tenant_id, key, request_print, T0,
                    lambda: idempotency.Answer(201, views.job_detail(
                        jobs.create_job(_scope(api, services), _draft())).model_dump()))
                outcomes.append("replayed" if answer.replayed else "created")
            except ConflictError:
                outcomes.append("in flight")

        threads = [threading.Thread(target=post) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert sorted(outcomes) in (["created", "in flight"], ["created", "replayed"])
        assert count(db, "jobs", api.tenant_id) == attempt + 1


def test_a_claim_abandoned_mid_request_is_taken_over_after_its_lease(api: Api, services: Services) -> None:
    request_print = idempotency.fingerprint("POST", "/jobs", {})
    with services.db.connection() as conn:
        conn.execute("INSERT INTO idempotency_keys (tenant_id, key, fingerprint, created_at) VALUES (%s, %s, %s, %s)",
                     (api.tenant_id, KEY, request_print, T0))
    with pytest.raises(ConflictError):
        idempotency.run_once(services.db, api.tenant_id, KEY, request_print, T0 + timedelta(seconds=59), _never)
    later = T0 + idempotency.IN_FLIGHT_LEASE + timedelta(seconds=1)
    answer = idempotency.run_once(services.db, api.tenant_id, KEY, request_print, later,
                                  lambda: idempotency.Answer(201, {"ok": True}))
    assert answer == idempotency.Answer(201, {"ok": True})
