"""POST /executions/{id}/replay and POST /jobs/{id}/replay through the real handler, Postgres and Redis: what
may be replayed, the 400s naming their field, tenants kept apart, the pace, dry runs and Idempotency-Key.
Nothing is sent here (no poller runs): tests/local/test_replay_end_to_end.py sends replays to a real target."""
from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from tests.integration.api_client import Api, use_clock, use_settings
from tickwork.dueindex.entries import execution_member
from tickwork.rules import replay
from tickwork.settings import DEFAULT_REPLAY_PER_SECOND
from tickwork.store.tenants import create_api_key, create_tenant
from tickwork.timeutil import rfc3339, to_ms
from tickwork.wiring import Services

NOW = datetime(2031, 3, 9, 12, 0, 0, tzinfo=timezone.utc)
DAY_AGO = NOW - timedelta(days=1)


@pytest.fixture(autouse=True)
def pinned(api: Api) -> None:
    use_clock(NOW.timestamp)  # after `api`, whose settings would replace the clock


def add_runs(db: Any, tenant_id: str, job_id: str, status: str, slots: list[datetime], attempts: int = 0) -> list[str]:
    """Execution rows as the poller and executors leave them (their attempts are not needed here)."""
    ids = [str(uuid.uuid4()) for _ in slots]
    db.execute(
        "INSERT INTO executions (id, tenant_id, job_id, scheduled_for, trigger, status, attempt_count, finished_at,"
        " last_error)"
        " SELECT id, %s, %s, slot, 'schedule', %s, %s, CASE WHEN %s IN ('queued', 'running', 'retrying') THEN NULL"
        " ELSE slot END, 'HTTP 503' FROM unnest(%s::uuid[], %s::timestamptz[]) AS r(id, slot)",
        (tenant_id, job_id, status, attempts, status, ids, slots))
    return ids


def slots(count: int, start: datetime = DAY_AGO, step: timedelta = timedelta(minutes=1)) -> list[datetime]:
    return [start + step * i for i in range(count)]


def due_ms(api: Api, execution_id: str, attempt: int) -> int | None:
    member = execution_member(execution_id, attempt)
    score = api.index.redis.zscore(api.index.shard_of_member(member).due_key, member)
    return None if score is None else int(score)


def window(since: datetime = DAY_AGO - timedelta(hours=1), until: datetime = NOW, **fields: Any) -> dict[str, Any]:
    return {"since": rfc3339(since), "until": rfc3339(until), **fields}


# ---------------------------------------------------------------- one run


def test_a_failed_run_is_queued_again_as_the_same_run_after_its_attempts(api: Api, db: Any) -> None:
    job = api.create()
    [run_id] = add_runs(db, api.tenant_id, job["id"], "failed", [DAY_AGO], attempts=4)
    reply = api.call("POST", f"/executions/{run_id}/replay")
    assert reply.status == 202, reply.body
    run = reply.body
    assert (run["id"], run["status"], run["attempt_count"]) == (run_id, "retrying", 4)
    assert (run["replay_count"], run["replayed_at"], run["next_attempt_at"]) == (1, rfc3339(NOW), rfc3339(NOW))
    assert (run["finished_at"], run["last_error"]) == (None, None)
    assert due_ms(api, run_id, 5) == to_ms(NOW)  # attempt 5, after the 4 it had
    assert db.execute("SELECT replay_base FROM executions WHERE id = %s", (run_id,)).fetchone()[0] == 4
    shown = api.call("GET", f"/executions/{run_id}").body
    assert (shown["replay_count"], shown["replayed_at"]) == (1, rfc3339(NOW))


@pytest.mark.parametrize("status", ["missed", "skipped"])
def test_a_slot_that_never_ran_gets_its_first_attempt(api: Api, db: Any, status: str) -> None:
    job = api.create()
    [run_id] = add_runs(db, api.tenant_id, job["id"], status, [DAY_AGO])
    reply = api.call("POST", f"/executions/{run_id}/replay")
    assert reply.status == 202, reply.body
    assert (reply.body["status"], reply.body["attempt_count"]) == ("queued", 0)
    assert due_ms(api, run_id, 1) == to_ms(NOW)


@pytest.mark.parametrize(("status", "says"), [("succeeded", "succeeded"), ("running", "still in progress"),
                                              ("retrying", "still in progress"), ("queued", "still in progress")])
def test_a_succeeded_run_or_one_in_progress_is_a_409(api: Api, db: Any, status: str, says: str) -> None:
    job = api.create()
    [run_id] = add_runs(db, api.tenant_id, job["id"], status, [DAY_AGO], attempts=1)
    reply = api.call("POST", f"/executions/{run_id}/replay")
    assert reply.status == 409 and reply.body["error"]["code"] == "conflict"
    assert says in reply.body["error"]["message"]
    assert db.execute("SELECT status, replay_count FROM executions WHERE id = %s", (run_id,)).fetchone() == (status, 0)


def test_a_run_replayed_twice_is_a_409_until_it_ends_again(api: Api, db: Any) -> None:
    job = api.create()
    [run_id] = add_runs(db, api.tenant_id, job["id"], "lost", [DAY_AGO], attempts=3)
    assert api.call("POST", f"/executions/{run_id}/replay").status == 202
    again = api.call("POST", f"/executions/{run_id}/replay")
    assert again.status == 409 and "still in progress (retrying)" in again.body["error"]["message"]


def test_a_run_of_a_deleted_job_is_a_409_and_of_a_paused_job_is_replayed(api: Api, db: Any) -> None:
    deleted, paused = api.create(), api.create()
    [gone] = add_runs(db, api.tenant_id, deleted["id"], "failed", [DAY_AGO], attempts=1)
    [kept] = add_runs(db, api.tenant_id, paused["id"], "failed", [DAY_AGO], attempts=1)
    assert api.call("DELETE", f"/jobs/{deleted['id']}").status == 204
    assert api.call("POST", f"/jobs/{paused['id']}/pause").status == 200

    refused = api.call("POST", f"/executions/{gone}/replay")
    assert refused.status == 409 and "deleted" in refused.body["error"]["message"]
    assert api.call("POST", f"/executions/{kept}/replay").status == 202
    assert api.call("POST", f"/jobs/{deleted['id']}/replay", window()).status == 404


def test_unknown_and_malformed_ids_are_404(api: Api) -> None:
    assert api.call("POST", f"/executions/{uuid.uuid4()}/replay").status == 404
    assert api.call("POST", "/executions/not-a-uuid/replay").status == 404
    assert api.call("POST", f"/jobs/{uuid.uuid4()}/replay", window()).status == 404


# ---------------------------------------------------------------- tenants


def test_another_tenants_runs_and_jobs_do_not_exist(api: Api, db: Any) -> None:
    job = api.create()
    mine = add_runs(db, api.tenant_id, job["id"], "failed", slots(3), attempts=1)
    other_tenant = create_tenant(db, "tenant-b")
    other_key = create_api_key(db, other_tenant, token="tw_" + "b" * 43)
    theirs = api.call("POST", "/jobs", {"name": "b", "schedule": "0 * * * * *",
                                        "request": {"url": "https://example.com/b"}}, token=other_key).body
    add_runs(db, other_tenant, theirs["id"], "failed", slots(2), attempts=1)

    assert api.call("POST", f"/executions/{mine[0]}/replay", token=other_key).status == 404
    assert api.call("POST", f"/jobs/{job['id']}/replay", window(), token=other_key).status == 404
    replayed = api.call("POST", f"/jobs/{theirs['id']}/replay", window(), token=other_key)
    assert replayed.status == 202 and replayed.body["count"] == 2
    assert db.execute("SELECT count(*) FROM executions WHERE tenant_id = %s AND replay_count > 0",
                      (api.tenant_id,)).fetchone()[0] == 0


def test_each_tenant_has_its_own_pace(api: Api, db: Any, services: Services) -> None:
    use_settings(services, replay_per_second=1)
    use_clock(NOW.timestamp)
    job = api.create()
    add_runs(db, api.tenant_id, job["id"], "failed", slots(5), attempts=1)
    other_tenant = create_tenant(db, "tenant-b")
    other_key = create_api_key(db, other_tenant, token="tw_" + "c" * 43)
    theirs = api.call("POST", "/jobs", {"name": "b", "schedule": "0 * * * * *",
                                        "request": {"url": "https://example.com/b"}}, token=other_key).body
    add_runs(db, other_tenant, theirs["id"], "failed", slots(2), attempts=1)

    assert api.call("POST", f"/jobs/{job['id']}/replay", window()).body["last_at"] == rfc3339(
        NOW + replay.lead(5) + timedelta(seconds=4))
    # B's replay is not queued behind A's five seconds.
    assert api.call("POST", f"/jobs/{theirs['id']}/replay", window(), token=other_key).body["first_at"] == rfc3339(
        NOW + replay.lead(2))


# ---------------------------------------------------------------- a window


def test_a_window_is_replayed_in_slot_order_at_the_tenants_pace(api: Api, db: Any) -> None:
    job = api.create()
    failed = add_runs(db, api.tenant_id, job["id"], "failed", slots(10, step=timedelta(minutes=2)), attempts=2)
    missed = add_runs(db, api.tenant_id, job["id"], "missed", slots(10, start=DAY_AGO + timedelta(minutes=1),
                                                                      step=timedelta(minutes=2)))
    add_runs(db, api.tenant_id, job["id"], "succeeded", [DAY_AGO + timedelta(seconds=30)], attempts=1)
    add_runs(db, api.tenant_id, job["id"], "skipped", [DAY_AGO + timedelta(seconds=40)])
    add_runs(db, api.tenant_id, job["id"], "failed", [NOW], attempts=1)  # at `until`: outside

    reply = api.call("POST", f"/jobs/{job['id']}/replay", window())
    assert reply.status == 202, reply.body
    in_order = [run_id for pair in zip(failed, missed) for run_id in pair]
    gap_ms = 1000 // DEFAULT_REPLAY_PER_SECOND
    start = NOW + replay.lead(20)  # 6 ms: the time writing 20 runs may take
    assert reply.body == {"count": 20, "execution_ids": in_order, "execution_ids_truncated": False,
                          "first_at": rfc3339(start), "last_at": rfc3339(start + timedelta(milliseconds=19 * gap_ms)),
                          "dry_run": False, "at_replay_limit": 0}
    scores = [due_ms(api, run_id, 3 if run_id in failed else 1) for run_id in in_order]
    assert scores == [to_ms(start) + i * gap_ms for i in range(20)]

    # The next replay of the tenant starts where this one's pace ends, even one asked for at once.
    [later] = add_runs(db, api.tenant_id, job["id"], "lost", [DAY_AGO - timedelta(minutes=5)], attempts=1)
    assert api.call("POST", f"/executions/{later}/replay").body["next_attempt_at"] == rfc3339(
        start + timedelta(milliseconds=20 * gap_ms))


def test_statuses_choose_which_runs_and_skipped_is_opt_in(api: Api, db: Any) -> None:
    job = api.create()
    [lost] = add_runs(db, api.tenant_id, job["id"], "lost", [DAY_AGO], attempts=1)
    [skipped] = add_runs(db, api.tenant_id, job["id"], "skipped", [DAY_AGO + timedelta(minutes=1)])
    add_runs(db, api.tenant_id, job["id"], "failed", [DAY_AGO + timedelta(minutes=2)], attempts=1)
    reply = api.call("POST", f"/jobs/{job['id']}/replay", window(statuses=["lost", "skipped", "lost"]))
    assert reply.body["execution_ids"] == [lost, skipped]


def test_a_dry_run_counts_and_predicts_and_changes_nothing(api: Api, db: Any) -> None:
    job = api.create()
    ids = add_runs(db, api.tenant_id, job["id"], "failed", slots(replay.MAX_IDS_LISTED + 1, step=timedelta(seconds=1)),
                   attempts=1)
    dry = api.call("POST", f"/jobs/{job['id']}/replay", window(dry_run=True))
    assert dry.status == 202, dry.body
    assert (dry.body["count"], dry.body["execution_ids"], dry.body["execution_ids_truncated"]) == (
        len(ids), ids[:replay.MAX_IDS_LISTED], True)
    assert db.execute("SELECT count(*) FROM executions WHERE replay_count > 0 OR status <> 'failed'").fetchone()[0] == 0
    assert db.execute("SELECT count(*) FROM replay_pace").fetchone()[0] == 0
    assert due_ms(api, ids[0], 2) is None

    done = api.call("POST", f"/jobs/{job['id']}/replay", window())
    assert {k: done.body[k] for k in ("count", "first_at", "last_at")} == {
        k: dry.body[k] for k in ("count", "first_at", "last_at")}


def test_more_runs_than_one_request_replays_is_a_400_naming_until(api: Api, db: Any) -> None:
    job = api.create()
    add_runs(db, api.tenant_id, job["id"], "failed", slots(replay.MAX_RUNS + 1, step=timedelta(seconds=1)),
             attempts=1)
    reply = api.call("POST", f"/jobs/{job['id']}/replay", window())
    assert reply.status == 400 and reply.body["error"]["field"] == "until"
    assert f"more than {replay.MAX_RUNS}" in reply.body["error"]["message"]
    assert db.execute("SELECT count(*) FROM executions WHERE replay_count > 0").fetchone()[0] == 0
    # The window the message suggests fits.
    fits = api.call("POST", f"/jobs/{job['id']}/replay", window(until=DAY_AGO + timedelta(seconds=replay.MAX_RUNS - 1),
                                                               dry_run=True))
    assert fits.status == 202 and fits.body["count"] == replay.MAX_RUNS - 1


@pytest.mark.parametrize(("body", "field"), [
    ({"until": rfc3339(NOW)}, "since"),
    ({"since": rfc3339(DAY_AGO)}, "until"),
    (window(since=NOW, until=NOW), "until"),
    (window(since=NOW, until=DAY_AGO), "until"),
    (window(since=NOW - timedelta(days=32)), "until"),
    (window(statuses=[]), "statuses"),
    (window(statuses=["succeeded"]), "statuses.0"),
    (window(statuses="failed"), "statuses"),
    (window(dry_run="yes"), "dry_run"),
    (window() | {"since": "2031-03-09"}, "since"),
    (window() | {"until": 1_900_000_000}, "until"),
    (window(limit=5), "limit"),
])
def test_a_bad_window_is_a_400_naming_the_field(api: Api, body: dict[str, Any], field: str) -> None:
    job = api.create()
    reply = api.call("POST", f"/jobs/{job['id']}/replay", body)
    assert reply.status == 400, reply.body
    assert reply.body["error"]["code"] == "invalid_request" and reply.body["error"]["field"] == field


def test_a_missing_body_is_a_400(api: Api) -> None:
    job = api.create()
    reply = api.call("POST", f"/jobs/{job['id']}/replay")
    assert reply.status == 400, reply.body


# ---------------------------------------------------------------- Idempotency-Key


def test_a_retried_replay_with_its_key_replays_the_answer_not_the_runs(api: Api, db: Any) -> None:
    job = api.create()
    add_runs(db, api.tenant_id, job["id"], "failed", slots(3), attempts=1)
    key = {"Idempotency-Key": "replay-2031-03-08"}
    first = api.call("POST", f"/jobs/{job['id']}/replay", window(), headers=key)
    again = api.call("POST", f"/jobs/{job['id']}/replay", window(), headers=key)
    assert first.status == again.status == 202 and again.raw == first.raw
    assert again.headers["Idempotent-Replayed"] == "true"
    assert db.execute("SELECT sum(replay_count) FROM executions").fetchone()[0] == 3
    other = api.call("POST", f"/jobs/{job['id']}/replay", window(dry_run=True), headers=key)
    assert other.status == 422 and other.body["error"]["code"] == "idempotency_key_reused"


# ---------------------------------------------------------------- bounds


def replay_state(db: Any, ids: list[str]) -> list[tuple[str, int]]:
    return db.execute("SELECT status, replay_count FROM executions WHERE id = ANY(%s::uuid[]) ORDER BY scheduled_for",
                      (ids,)).fetchall()


def test_replays_past_the_tenants_replay_quota_are_a_403_that_changes_nothing(api: Api, db: Any,
                                                                            services: Services) -> None:
    """One runs:write key cannot queue replays without end: at most max_replays_queued wait for their instant.
    The other tenant, replaying meanwhile, has a queue of its own."""
    use_settings(services, max_replays_queued=25)
    clock = [NOW.timestamp()]
    use_clock(lambda: clock[0])
    job = api.create()
    first = add_runs(db, api.tenant_id, job["id"], "failed", slots(20), attempts=1)
    more = add_runs(db, api.tenant_id, job["id"], "failed", slots(10, start=NOW - timedelta(hours=2)), attempts=1)
    [single] = add_runs(db, api.tenant_id, job["id"], "lost", [NOW - timedelta(hours=3)], attempts=1)
    other_tenant = create_tenant(db, "tenant-b")
    other_key = create_api_key(db, other_tenant, token="tw_" + "d" * 43)
    theirs = api.call("POST", "/jobs", {"name": "b", "schedule": "0 * * * * *",
                                        "request": {"url": "https://example.com/b"}}, token=other_key).body
    add_runs(db, other_tenant, theirs["id"], "failed", slots(20), attempts=1)

    assert api.call("POST", f"/jobs/{job['id']}/replay", window(until=DAY_AGO + timedelta(hours=1))).body[
        "count"] == 20
    later = window(since=NOW - timedelta(hours=2), until=NOW - timedelta(hours=1))
    for body in (later, {**later, "dry_run": True}):
        refused = api.call("POST", f"/jobs/{job['id']}/replay", body)
        assert refused.status == 403, refused.body
        assert (refused.body["error"]["code"], refused.body["error"]["field"]) == ("quota_exceeded",
                                                                                  "max_replays_queued")
        assert "20 replayed runs waiting" in refused.body["error"]["message"]
    assert replay_state(db, more) == [("failed", 0)] * 10  # nothing lost, nothing half done
    assert all(due_ms(api, run_id, 2) is None for run_id in more)
    assert api.call("POST", f"/executions/{single}/replay").status == 202  # 21 of 25: one more fits

    replayed = api.call("POST", f"/jobs/{theirs['id']}/replay", window(), token=other_key)
    assert replayed.status == 202 and replayed.body["count"] == 20

    clock[0] += 2.5  # the first 20 went out, at 10 a second
    assert api.call("POST", f"/jobs/{job['id']}/replay", later).body["count"] == 10
    assert replay_state(db, first) == [("retrying", 1)] * 20


def test_a_run_is_replayed_at_most_max_replays_per_run_times(api: Api, db: Any) -> None:
    """Each replay gives a run its job's retry budget again: a run replays at most MAX_REPLAYS_PER_RUN times, so
    its attempts stay bounded. A window leaves such runs as they are and says how many."""
    job = api.create()
    [worn, fresh] = add_runs(db, api.tenant_id, job["id"], "failed", slots(2), attempts=3)
    db.execute("UPDATE executions SET replay_count = %s WHERE id = %s", (replay.MAX_REPLAYS_PER_RUN, worn))

    refused = api.call("POST", f"/executions/{worn}/replay")
    assert refused.status == 409, refused.body
    assert f"replayed {replay.MAX_REPLAYS_PER_RUN} times" in refused.body["error"]["message"]
    batch = api.call("POST", f"/jobs/{job['id']}/replay", window())
    assert batch.status == 202, batch.body
    assert (batch.body["count"], batch.body["execution_ids"], batch.body["at_replay_limit"]) == (1, [fresh], 1)
    assert replay_state(db, [worn, fresh]) == [("failed", replay.MAX_REPLAYS_PER_RUN), ("retrying", 1)]
