"""Jobs by key (issue 24): PUT creates or replaces a whole definition and is idempotent, the plan says what a PUT
would change and writes nothing, GET/DELETE by key, the key and source fields and filters. Real handler, real
Postgres and Redis."""
from __future__ import annotations

import itertools
import json
import threading
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

import pytest
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter

from tests.integration.api.test_api_scopes import key_with
from tests.integration.api_client import TARGET_SECRET, Api, job_body, use_clock
from tickwork.api.models import JobCreate
from tickwork.scope import Scope
from tickwork.store.tenants import create_api_key, create_tenant
from tickwork.tenant import bykey
from tickwork.tenant.access import JOBS_READ, JOBS_WRITE
from tickwork.models import JobDraft

SEALED_COMPARED = "plan compared sealed header values"
# One pinned clock for every request of a test: a Tuesday, off the whole second.
PINNED = datetime(2026, 3, 10, 14, 22, 7, 250000, tzinfo=timezone.utc)


@pytest.fixture(autouse=True)
def pinned(api: Api) -> datetime:
    use_clock(PINNED.timestamp)
    return PINNED


@pytest.fixture
def other(api: Api, db: Any) -> Api:
    tenant_id = create_tenant(db, "tenant-b")
    return Api(api.handler, create_api_key(db, tenant_id), tenant_id, api.index)


def stored(db: Any, job_id: str) -> tuple[Any, ...]:
    return db.execute("SELECT version, updated_at, request, key, source FROM jobs WHERE id = %s", (job_id,)).fetchone()


def test_put_creates_then_replaces_and_the_same_body_twice_changes_nothing(api: Api, db: Any) -> None:
    body = job_body(source="reports-repo", tags=["env:prod"])
    created = api.call("PUT", "/jobs/by-key/nightly-report", body)
    assert created.status == 201, created.body
    assert (created.body["key"], created.body["source"]) == ("nightly-report", "reports-repo")
    assert created.body["request"]["headers"]["Authorization"] == "***"
    before = stored(db, created.body["id"])
    assert TARGET_SECRET not in str(before[2])  # sealed at rest

    again = api.call("PUT", "/jobs/by-key/nightly-report", body)
    assert again.status == 200, again.body
    assert again.body["id"] == created.body["id"]
    assert stored(db, created.body["id"]) == before  # same version, same updated_at, same sealed value

    plan = api.call("POST", "/jobs/by-key/nightly-report/plan", body)
    assert plan.status == 200, plan.body
    assert plan.body == {"key": "nightly-report", "action": "unchanged", "job_id": created.body["id"], "changes": []}


def test_put_replaces_the_whole_definition_and_only_timing_moves_the_version(api: Api, db: Any) -> None:
    first = api.call("PUT", "/jobs/by-key/report", job_body(tags=["a"], description="x", overlap="skip")).body
    # Left out: tags, description and overlap take their defaults; the schedule is the same.
    replaced = api.call("PUT", "/jobs/by-key/report", job_body(name="renamed"))
    assert replaced.status == 200, replaced.body
    assert (replaced.body["name"], replaced.body["tags"], replaced.body["description"], replaced.body["overlap"]) == (
        "renamed", [], "", "allow")
    assert replaced.body["version"] == first["version"]
    assert replaced.body["updated_at"] == first["updated_at"]  # the pinned clock: same instant, but written
    assert stored(db, first["id"])[0] == first["version"]

    moved = api.call("PUT", "/jobs/by-key/report", job_body(name="renamed", schedule="0 0 3 * * *"))
    assert moved.status == 200, moved.body
    assert moved.body["version"] == first["version"] + 1
    assert moved.body["next_run_at"] != first["next_run_at"]


def test_plan_lists_the_changed_fields_old_and_new_and_writes_nothing(api: Api, db: Any) -> None:
    new = api.call("POST", "/jobs/by-key/report/plan", job_body())
    assert new.status == 200, new.body
    assert new.body == {"key": "report", "action": "create", "job_id": None, "changes": []}
    assert api.call("GET", "/jobs/by-key/report").status == 404  # the plan created nothing

    job = api.call("PUT", "/jobs/by-key/report", job_body()).body
    edited = job_body(schedule="0 0 3 * * *", tags=["b"], request={
        "url": "https://example.com/hooks/other", "headers": {"Authorization": "Bearer rotated",
                                                               "X-Team": "reports"}})
    before = stored(db, job["id"])
    plan = api.call("POST", "/jobs/by-key/report/plan", edited)
    assert plan.status == 200, plan.body
    changes = {c["field"]: (c["old"], c["new"]) for c in plan.body["changes"]}
    assert plan.body["action"] == "update"
    assert changes == {
        "schedule": ("0 30 2 * * *", "0 0 3 * * *"),
        "request.url": ("https://example.com/hooks/nightly-report", "https://example.com/hooks/other"),
        "request.headers.Authorization": ("***", "***"),  # changed, never shown
        "request.headers.Content-Type": ("application/json", None),
        "request.headers.X-Team": (None, "reports"),
        "tags": ([], ["b"]),
    }
    assert "rotated" not in plan.raw and TARGET_SECRET not in plan.raw
    assert stored(db, job["id"]) == before

    applied = api.call("PUT", "/jobs/by-key/report", edited)
    assert applied.status == 200, applied.body
    assert api.call("POST", "/jobs/by-key/report/plan", edited).body["action"] == "unchanged"


def test_redacted_header_sent_back_keeps_the_stored_value(api: Api, db: Any) -> None:
    job = api.call("PUT", "/jobs/by-key/report", job_body()).body
    before = stored(db, job["id"])
    read_back = job_body(request={"headers": {"Authorization": "***", "Content-Type": "application/json"}})
    assert api.call("POST", "/jobs/by-key/report/plan", read_back).body["action"] == "unchanged"
    assert api.call("PUT", "/jobs/by-key/report", read_back).status == 200
    assert stored(db, job["id"]) == before


def test_a_plan_by_a_key_that_may_not_write_learns_nothing_of_a_sealed_value(api: Api, db: Any,
                                                                              caplog: pytest.LogCaptureFixture) -> None:
    """A reader's plan is no password oracle: the right value and a guess answer the same."""
    job = api.call("PUT", "/jobs/by-key/report", job_body()).body
    before = stored(db, job["id"])
    reader = key_with(api, JOBS_READ)
    right = job_body()  # Authorization: Bearer TARGET_SECRET, as stored
    guess = job_body(request={"headers": {"Authorization": "Bearer guess", "Content-Type": "application/json"}})
    answers = [api.call("POST", "/jobs/by-key/report/plan", body, token=reader) for body in (right, guess)]
    assert [a.status for a in answers] == [200, 200], answers[1].body
    assert answers[0].body == answers[1].body
    assert answers[0].body["action"] == "update"
    assert answers[0].body["changes"] == [
        {"field": "request.headers.Authorization", "old": "***", "new": "***", "compared": False}]
    assert stored(db, job["id"]) == before
    assert not [r for r in caplog.records if r.getMessage() == SEALED_COMPARED]  # nothing was opened

    # A key that may write compares: it could read the value anyway, by pointing the job at its own host. Each
    # such plan is logged with the key and the fields, never the values.
    writer = key_with(api, JOBS_READ, JOBS_WRITE)
    assert api.call("POST", "/jobs/by-key/report/plan", right, token=writer).body["action"] == "unchanged"
    changed = api.call("POST", "/jobs/by-key/report/plan", guess, token=writer).body
    assert (changed["action"], changed["changes"][0]["compared"]) == ("update", True)
    logged = [json.loads(LambdaPowertoolsFormatter().format(r)) for r in caplog.records
              if r.getMessage() == SEALED_COMPARED]
    assert len(logged) == 2 and logged[0]["fields"] == ["request.headers.Authorization"]
    assert logged[0]["job_id"] == job["id"] and logged[0]["key_id"] and logged[0]["tenant_id"] == api.tenant_id
    assert TARGET_SECRET not in caplog.text and "guess" not in caplog.text


def test_secret_references_stay_references(api: Api) -> None:
    assert api.call("PUT", "/secrets/REPORT_TOKEN", {"value": "s3cr3t-value"}).status == 201
    body = job_body(request={"headers": {"Authorization": "Bearer ${secrets.REPORT_TOKEN}"}})
    assert api.call("PUT", "/jobs/by-key/report", body).status == 201
    assert api.call("POST", "/jobs/by-key/report/plan", body).body["action"] == "unchanged"
    missing = api.call("POST", "/jobs/by-key/other/plan",
                       job_body(request={"headers": {"Authorization": "Bearer ${secrets.NOPE}"}}))
    assert missing.status == 400
    assert missing.body["error"]["field"] == "request.headers.Authorization"


def test_paused_job_stays_paused_across_a_put(api: Api) -> None:
    job = api.call("PUT", "/jobs/by-key/report", job_body()).body
    assert api.call("POST", f"/jobs/{job['id']}/pause").status == 200
    replaced = api.call("PUT", "/jobs/by-key/report", job_body(schedule="0 0 3 * * *"))
    assert replaced.status == 200, replaced.body
    assert (replaced.body["status"], replaced.body["next_fire_times"]) == ("paused", [])


def test_get_and_delete_by_key_and_a_deleted_key_is_free_again(api: Api) -> None:
    job = api.call("PUT", "/jobs/by-key/report", job_body()).body
    got = api.call("GET", "/jobs/by-key/report")
    assert (got.status, got.body["id"], len(got.body["next_fire_times"])) == (200, job["id"], 5)
    assert api.call("DELETE", "/jobs/by-key/report").status == 204
    assert api.call("GET", "/jobs/by-key/report").status == 404
    assert api.call("DELETE", "/jobs/by-key/report").status == 404
    assert api.call("GET", f"/jobs/{job['id']}").status == 404
    again = api.call("PUT", "/jobs/by-key/report", job_body())
    assert again.status == 201 and again.body["id"] != job["id"]


def test_keys_that_look_like_routes_are_keys(api: Api) -> None:
    for key in ("executions", "run", "pause", "plan"):
        assert api.call("PUT", f"/jobs/by-key/{key}", job_body()).status == 201, key
        got = api.call("GET", f"/jobs/by-key/{key}")
        assert (got.status, got.body["key"]) == (200, key)


def test_keys_are_per_tenant(api: Api, other: Api) -> None:
    mine = api.call("PUT", "/jobs/by-key/report", job_body()).body
    assert other.call("GET", "/jobs/by-key/report").status == 404
    assert other.call("DELETE", "/jobs/by-key/report").status == 404
    assert other.call("POST", "/jobs/by-key/report/plan", job_body()).body["action"] == "create"
    theirs = other.call("PUT", "/jobs/by-key/report", job_body(name="theirs"))
    assert theirs.status == 201 and theirs.body["id"] != mine["id"]
    assert api.call("GET", "/jobs/by-key/report").body["name"] == mine["name"]
    assert other.call("GET", "/jobs", query={"key": "report"}).body["items"][0]["id"] == theirs.body["id"]


def test_key_on_create_and_patch_is_unique_and_immutable(api: Api) -> None:
    keyed = api.create(key="report")
    assert keyed["key"] == "report"
    taken = api.call("POST", "/jobs", job_body(key="report"))
    assert (taken.status, taken.body["error"]["field"]) == (409, "key")

    plain = api.create()
    assert plain["key"] is None
    set_once = api.call("PATCH", f"/jobs/{plain['id']}", {"key": "second"})
    assert (set_once.status, set_once.body["key"]) == (200, "second")
    same = api.call("PATCH", f"/jobs/{plain['id']}", {"key": "second"})
    assert same.status == 200
    changed = api.call("PATCH", f"/jobs/{plain['id']}", {"key": "third"})
    assert (changed.status, changed.body["error"]["field"]) == (400, "key")
    clash = api.call("PATCH", f"/jobs/{api.create()['id']}", {"key": "report"})
    assert (clash.status, clash.body["error"]["field"]) == (409, "key")
    source = api.call("PATCH", f"/jobs/{plain['id']}", {"source": "ops"})
    assert source.body["source"] == "ops"
    assert api.call("PATCH", f"/jobs/{plain['id']}", {"source": None}).body["source"] is None


@pytest.mark.parametrize(("method", "path", "body", "field"), [
    ("PUT", "/jobs/by-key/Upper", job_body(), "key"),
    ("PUT", "/jobs/by-key/-dash-first", job_body(), "key"),
    ("PUT", "/jobs/by-key/" + "a" * 129, job_body(), "key"),
    ("PUT", "/jobs/by-key/report", job_body(key="other"), "key"),
    ("PUT", "/jobs/by-key/report", job_body(key="Bad Key"), "key"),
    ("PUT", "/jobs/by-key/report", job_body(source="has space"), "source"),
    ("PUT", "/jobs/by-key/report", job_body(schedule="bogus"), "schedule"),
    ("PUT", "/jobs/by-key/report", job_body(request={"url": "ftp://example.com/x"}), "request.url"),
    ("PUT", "/jobs/by-key/report", job_body(extra=1), "extra"),
    ("POST", "/jobs/by-key/report/plan", job_body(schedule="bogus"), "schedule"),
    ("POST", "/jobs/by-key/Upper/plan", job_body(), "key"),
    ("POST", "/jobs", job_body(key="UPPER"), "key"),
    ("GET", "/jobs", None, "key"),
])
def test_bad_input_is_a_400_naming_the_field(api: Api, method: str, path: str, body: Any, field: str) -> None:
    query = {"key": "Not A Key"} if method == "GET" else None
    reply = api.call(method, path, body, query=query)
    assert reply.status == 400, reply.body
    assert reply.body["error"]["field"] == field
    assert api.call("GET", "/jobs").body["items"] == []


def test_list_filters_by_key_and_source_across_pages(api: Api) -> None:
    for n in range(5):
        api.call("PUT", f"/jobs/by-key/job-{n}", job_body(source="file-a" if n % 2 == 0 else "file-b"))
    api.create()  # no key, no source
    assert [j["key"] for j in api.call("GET", "/jobs", query={"key": "job-3"}).body["items"]] == ["job-3"]
    seen: list[str] = []
    cursor: str | None = None
    for _ in itertools.count():
        page = api.call("GET", "/jobs", query={"source": "file-a", "limit": "2", **({"cursor": cursor} if cursor else {})})
        seen += [j["key"] for j in page.body["items"]]
        cursor = page.body["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == ["job-0", "job-2", "job-4"]
    assert api.call("GET", "/jobs", query={"source": "nobody"}).body["items"] == []


def test_a_put_that_would_exceed_a_quota_is_refused_and_the_plan_says_so(api: Api, services: Any) -> None:
    from tests.integration.api_client import use_settings
    use_settings(services, allow_private_targets=False, max_jobs=1)
    use_clock(PINNED.timestamp)
    assert api.call("PUT", "/jobs/by-key/one", job_body()).status == 201
    assert api.call("PUT", "/jobs/by-key/one", job_body(name="still one")).status == 200
    over = api.call("PUT", "/jobs/by-key/two", job_body())
    assert over.status == 403, over.body
    assert api.call("POST", "/jobs/by-key/two/plan", job_body()).status == 403


def test_concurrent_puts_of_a_new_key_make_one_job(api: Api, services: Any, db: Any) -> None:
    """Each PUT runs in its own thread on its own connection, as separate Lambda environments do: the unique
    index decides which creates; the others replace that job."""
    draft = JobDraft.from_dict(JobCreate.model_validate(job_body()).model_dump())
    assert api.call("GET", "/jobs").status == 200  # as every request does first: the keyring's first data key
    for attempt in range(3):
        key, start, outcomes = f"race-{attempt}", threading.Barrier(4), []

        def put(name: str) -> None:
            scope = Scope(services.db, api.index, services.settings, api.tenant_id, PINNED, services.keyring)
            start.wait(timeout=10)
            put, created = bykey.put_job_by_key(scope, key, replace(draft, name=name))
            outcomes.append((put.job.id, created))

        threads = [threading.Thread(target=put, args=(f"writer {n}",)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert len(outcomes) == 4
        assert sorted(created for _, created in outcomes) == [False, False, False, True]
        assert len({job_id for job_id, _ in outcomes}) == 1
        live = db.execute("SELECT count(*) FROM jobs WHERE tenant_id = %s AND key = %s AND status <> 'deleted'",
                          (api.tenant_id, key)).fetchone()[0]
        assert live == 1


def test_spread_is_part_of_the_definition(api: Api) -> None:
    hourly = job_body(schedule="0 0 * * * *")
    job = api.call("PUT", "/jobs/by-key/spread", hourly).body
    spread = {**hourly, "spread_seconds": 600}
    plan = api.call("POST", "/jobs/by-key/spread/plan", spread).body
    assert [(c["field"], c["old"], c["new"]) for c in plan["changes"]] == [("spread_seconds", 0, 600)]
    moved = api.call("PUT", "/jobs/by-key/spread", spread).body
    assert (moved["spread_seconds"], moved["version"]) == (600, job["version"] + 1)
    assert api.call("POST", "/jobs/by-key/spread/plan", spread).body["action"] == "unchanged"


def test_a_put_and_a_plan_open_a_kept_sealed_header_once(api: Api, services: Any, db: Any,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A changed definition sending Authorization again as written: comparing it with the stored one opens the
    sealed value, and the secrets check of the new request takes it from there instead of opening it again."""
    job = api.call("PUT", "/jobs/by-key/report", job_body()).body
    before = stored(db, job["id"])[2]["headers"]["Authorization"]
    opened: list[str] = []
    keyring_open = services.keyring.open

    def counted(keys: Any, sealed: str, context: str) -> str:
        opened.append(context)
        return keyring_open(keys, sealed, context)

    monkeypatch.setattr(services.keyring, "open", counted)
    moved = job_body(request={"url": "https://example.com/hooks/moved"})
    assert api.call("POST", "/jobs/by-key/report/plan", moved).body["action"] == "update"
    assert api.call("PUT", "/jobs/by-key/report", moved).status == 200
    header = f"header/{api.tenant_id}/{job['id']}/authorization"
    assert opened == [header, header]  # once for the plan, once for the PUT
    assert stored(db, job["id"])[2]["headers"]["Authorization"] == before  # kept, not sealed anew
