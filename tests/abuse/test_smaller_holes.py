"""The smaller holes of issue 31, item 6, tried as a hostile tenant's keys would: a read-only key testing guesses of
a sealed header against the plan, a runs:write key replaying without end, a jobs:write key sending a bound secret
over http or having a forged body signed, and pages of large jobs. Each gets the safe answer while the benign
tenant's every-second job keeps its second."""
from __future__ import annotations

import json
import time
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from tests.abuse.conftest import Arena, call
from tests.support import wait_for
from tickwork.api.models import MAX_BODY_CHARS
from tickwork.tenant.operator import set_quotas
from tickwork.rules.replay import MAX_REPLAYS_PER_RUN

pytestmark = [pytest.mark.slow, pytest.mark.realtime]

YEARLY = "0 0 0 1 1 *"
# What Lambda answers a synchronous invocation with at most.
LAMBDA_RESPONSE_BYTES = 6 * 1024 * 1024
HEAVY = ('"\\\x01\U0001F600' * MAX_BODY_CHARS)[:MAX_BODY_CHARS]


def _job(arena: Arena, path: str, **request: Any) -> dict[str, Any]:
    return {"name": path.strip("/").replace("/", "-"), "schedule": YEARLY,
            "request": {"method": "POST", "url": arena.target.url + path, **request}}


def _hostile_key(arena: Arena, *scopes: str) -> str:
    status, key = arena.hostile("POST", "/api-keys", {"name": "-".join(scopes), "scopes": list(scopes)})
    assert status == 201, key
    return str(key["key"])


def test_a_read_only_key_cannot_test_guesses_of_a_sealed_header(arena: Arena) -> None:
    started = time.time()
    password = _job(arena, "/hostile/plan", headers={"Authorization": "Bearer right-password"})
    assert arena.hostile("PUT", "/jobs/by-key/holds-a-password", password)[0] == 201
    reader = _hostile_key(arena, "jobs:read")
    guess = _job(arena, "/hostile/plan", headers={"Authorization": "Bearer a-guess"})
    answers = [call(arena.url, "POST", "/jobs/by-key/holds-a-password/plan", reader, body)
               for body in (password, guess)]
    assert answers[0] == answers[1] and answers[0][0] == 200, answers
    assert [(c["field"], c["compared"]) for c in answers[0][1]["changes"]] == [
        ("request.headers.Authorization", False)]
    # Another tenant's key, by key: a job it does not have.
    assert arena.benign("PUT", "/jobs/by-key/benign-keyed", _job(arena, "/benign-keyed"))[0] == 201
    status, plan = arena.hostile("POST", "/jobs/by-key/benign-keyed/plan", password)
    assert (status, plan["action"], plan["job_id"]) == (200, "create", None)
    arena.assert_benign_on_time(started, max(time.time(), started + 3))


def _failed_runs(arena: Arena, job_id: str) -> list[dict[str, Any]]:
    status, page = arena.hostile("GET", "/executions" + query_path(job_id=job_id, status="failed", limit="200"))
    assert status == 200, page
    return list(page["items"])


def query_path(**query: str) -> str:
    return "?" + "&".join(f"{k}={v}" for k, v in query.items())


def test_replays_are_bounded_per_tenant_and_per_run(arena: Arena) -> None:
    assert arena.runtime._services is not None
    set_quotas(arena.runtime._services.db, arena.runtime._services.settings,
               {"tenant": arena.hostile_tenant, "max_replays_queued": 3})
    status, job = arena.hostile("POST", "/jobs", {  # every run fails at once: nothing listens on port 1
        "name": "fails", "schedule": "* * * * * *", "request": {"url": "http://127.0.0.1:1/refused"},
        "retry": {"max_attempts": 1}})
    assert status == 201, job
    assert wait_for(lambda: len(_failed_runs(arena, job["id"])) >= 5, timeout=20, interval=0.5)
    assert arena.hostile("POST", f"/jobs/{job['id']}/pause")[0] == 200
    started = time.time()
    window = {"since": job["created_at"], "until": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))}

    status, refused = arena.hostile("POST", f"/jobs/{job['id']}/replay", window)
    assert status == 403 and refused["error"]["field"] == "max_replays_queued", refused
    failed = _failed_runs(arena, job["id"])
    assert all(run["replay_count"] == 0 for run in failed)  # nothing queued, nothing lost

    run_id = failed[-1]["id"]
    for _ in range(MAX_REPLAYS_PER_RUN):
        status, replayed = arena.hostile("POST", f"/executions/{run_id}/replay")
        assert status == 202, replayed
        assert wait_for(lambda: arena.hostile("GET", f"/executions/{run_id}")[1]["status"] == "failed",
                        timeout=10, interval=0.2)
    status, worn = arena.hostile("POST", f"/executions/{run_id}/replay")
    assert status == 409 and f"replayed {MAX_REPLAYS_PER_RUN} times" in worn["error"]["message"], worn
    arena.assert_benign_on_time(started)


def test_a_secret_bound_to_a_host_is_not_sent_there_over_http(arena: Arena) -> None:
    started = time.time()
    assert arena.hostile("PUT", "/secrets/BOUND", {"value": "v", "allowed_hosts": ["api.example.com"]})[0] == 201
    writer = _hostile_key(arena, "jobs:write")
    for url in ("http://api.example.com/x", "https://api.example.com:8443/x"):
        status, refused = call(arena.url, "POST", "/jobs", writer, {
            "name": "downgrade", "schedule": YEARLY,
            "request": {"url": url, "headers": {"Authorization": "Bearer ${secrets.BOUND}"}}})
        assert status == 400 and refused["error"]["field"] == "request.headers.Authorization", refused
    arena.assert_benign_on_time(started, max(time.time(), started + 3))


def test_a_forged_body_is_told_from_the_real_job_and_another_tenants_does_not_verify(arena: Arena) -> None:
    started = time.time()
    secret = arena.benign("GET", "/signing-secret")[1]["secret"]
    status, payroll = arena.benign("POST", "/jobs", _job(arena, "/receiver", body='{"pay": "alice"}'))
    assert status == 201, payroll
    status, writer = arena.benign("POST", "/api-keys", {"name": "w", "scopes": ["jobs:write", "runs:write"]})
    assert status == 201 and call(arena.url, "GET", "/signing-secret", writer["key"])[0] == 403
    forged = call(arena.url, "POST", "/jobs", writer["key"], _job(arena, "/receiver", body='{"pay": "mallory"}'))[1]
    theirs = arena.hostile("POST", "/jobs", _job(arena, "/receiver", body='{"pay": "mallory"}'))[1]
    assert call(arena.url, "POST", f"/jobs/{payroll['id']}/run", arena.benign_key)[0] == 202
    assert call(arena.url, "POST", f"/jobs/{forged['id']}/run", writer["key"])[0] == 202
    assert arena.hostile("POST", f"/jobs/{theirs['id']}/run")[0] == 202
    assert wait_for(lambda: len(_received(arena, started)) == 3, timeout=10, interval=0.2)

    def accepted(request: dict[str, Any]) -> bool:
        try:
            Webhook(secret).verify(request["body"], {k.lower(): v for k, v in request["headers"].items()})
        except WebhookVerificationError:
            return False
        return request["headers"]["webhook-id"].split(":")[0] == payroll["id"]

    by_job = {r["headers"]["Tickwork-Job-Id"]: r for r in _received(arena, started)}
    assert [accepted(by_job[j["id"]]) for j in (payroll, forged, theirs)] == [True, False, False]
    arena.assert_benign_on_time(started)


def _received(arena: Arena, since: float) -> list[dict[str, Any]]:
    return [r for r in list(arena.target.requests) if r["path"] == "/receiver" and r["at"] >= since]


def test_pages_of_large_jobs_stay_under_lambdas_limit_and_hold_each_job_once(arena: Arena) -> None:
    ids = set()
    for i in range(30):
        status, job = arena.hostile("POST", "/jobs", {**_job(arena, f"/hostile/large-{i}"), "request": {
            "method": "POST", "url": arena.target.url + "/hostile/large", "body": HEAVY}})
        assert status == 201, job
        ids.add(job["id"])
    started = time.time()
    seen: list[str] = []
    cursor = ""
    while True:
        status, page = arena.hostile("GET", "/jobs" + query_path(limit="200", **({"cursor": cursor} if cursor else {})))
        assert status == 200, page
        # The body as the resolver writes it, inside the Lambda response's JSON as a string.
        assert len(json.dumps(json.dumps(page, separators=(",", ":")))) < LAMBDA_RESPONSE_BYTES
        seen += [job["id"] for job in page["items"]]
        if not page["next_cursor"]:
            break
        cursor = page["next_cursor"]
    assert ids <= set(seen) and len(seen) == len(set(seen))
    arena.assert_benign_on_time(started, max(time.time(), started + 3))
