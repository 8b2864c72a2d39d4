"""Finding things through the API: job tags and descriptions, filtered job lists, the tenant-wide execution
list and the run statistics. Real handler, real Postgres and Redis; history rows are written with SQL."""
from __future__ import annotations

import statistics
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from tests.integration.api_client import Api, job_body, use_clock
from tickwork.scope import Scope
from tickwork.store.tenants import create_api_key, create_tenant
from tickwork.tenant import stats
from tickwork.wiring import Services


@pytest.fixture
def other(api: Api, db: Any) -> Api:
    """A second tenant, calling the same API with its own key."""
    tenant_id = create_tenant(db, "tenant-b")
    return Api(api.handler, create_api_key(db, tenant_id), tenant_id, api.index)


def insert_execution(
    db: Any, tenant_id: str, job_id: str, scheduled_for: datetime, status: str = "succeeded",
    trigger: str = "schedule", lag_ms: float | None = None,
) -> str:
    """An execution row (and its first attempt, sent `lag_ms` after the slot, when given)."""
    execution_id = str(uuid.uuid4())
    db.execute(
        "INSERT INTO executions (id, tenant_id, job_id, scheduled_for, trigger, status, attempt_count)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s)",
        (execution_id, tenant_id, job_id, scheduled_for, trigger, status, 0 if lag_ms is None else 1),
    )
    if lag_ms is not None:
        db.execute(
            "INSERT INTO attempts (execution_id, number, started_at, duration_ms, status_code)"
            " VALUES (%s, 1, %s, 12, 200)",
            (execution_id, scheduled_for + timedelta(milliseconds=lag_ms)),
        )
    return execution_id


def all_pages(api: Api, path: str, query: dict[str, str], limit: int = 2) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        page_query = {**query, "limit": str(limit), **({"cursor": cursor} if cursor else {})}
        reply = api.call("GET", path, query=page_query)
        assert reply.status == 200, reply.body
        assert len(reply.body["items"]) <= limit
        items += reply.body["items"]
        cursor = reply.body["next_cursor"]
        if cursor is None:
            return items


def error_field(reply: Any) -> tuple[int, str | None]:
    return reply.status, (reply.body or {}).get("error", {}).get("field")


# ---------------------------------------------------------------- tags and description

def test_tags_and_description_are_stored_shown_and_replaced(api: Api) -> None:
    job = api.create(tags=["env:prod", "team=payments", "env:prod", "eu-west-1"], description="Nightly report.")

    assert job["tags"] == ["env:prod", "team=payments", "eu-west-1"]  # a repeated tag is kept once, in order
    assert job["description"] == "Nightly report."
    assert job["schedule_description"]  # the schedule in words moved out of the way of the user's text
    assert api.call("GET", f"/jobs/{job['id']}").body["tags"] == job["tags"]
    listed = api.call("GET", "/jobs").body["items"][0]
    assert (listed["tags"], listed["description"]) == (job["tags"], "Nightly report.")

    patched = api.call("PATCH", f"/jobs/{job['id']}", {"tags": ["b", "a"], "description": ""})
    assert patched.status == 200, patched.body
    assert (patched.body["tags"], patched.body["description"]) == (["b", "a"], "")
    assert patched.body["version"] == job["version"]  # labels are not a schedule change
    cleared = api.call("PATCH", f"/jobs/{job['id']}", {"tags": []})
    assert cleared.body["tags"] == [] and cleared.body["description"] == ""


def test_a_job_created_without_them_has_no_tags_and_an_empty_description(api: Api) -> None:
    job = api.create()
    assert (job["tags"], job["description"]) == ([], "")


@pytest.mark.parametrize(("fields", "field"), [
    ({"tags": ["has space"]}, "tags.0"),
    ({"tags": ["ok", "comma,inside"]}, "tags.1"),
    ({"tags": ["-leading-dash"]}, "tags.0"),
    ({"tags": [""]}, "tags.0"),
    ({"tags": ["x" * 65]}, "tags.0"),
    ({"tags": [f"t{i}" for i in range(21)]}, "tags"),
    ({"tags": "env:prod"}, "tags"),
    ({"description": "x" * 1001}, "description"),
    ({"description": "nul\x00inside"}, "description"),
])
def test_bad_tags_and_descriptions_are_400s_naming_the_field(api: Api, fields: dict[str, Any], field: str) -> None:
    reply = api.call("POST", "/jobs", job_body(**fields))
    assert error_field(reply) == (400, field), reply.body


def test_the_limits_themselves_are_accepted(api: Api) -> None:
    job = api.create(tags=[f"{i:02d}" + "x" * 62 for i in range(20)], description="d" * 1000)
    assert len(job["tags"]) == 20 and len(job["description"]) == 1000


def test_patching_tags_or_description_to_null_is_refused(api: Api) -> None:
    job = api.create(tags=["a"])
    for field in ("tags", "description"):
        reply = api.call("PATCH", f"/jobs/{job['id']}", {field: None})
        assert error_field(reply) == (400, field), reply.body


# ---------------------------------------------------------------- filtered job lists

@pytest.fixture
def catalogue(api: Api, other: Api) -> dict[str, str]:
    """Jobs of tenant A with known names, tags and states (and one of tenant B that matches everything)."""
    made = {
        "report-daily": api.create(name="report-daily", tags=["env:prod", "team=data"]),
        "report-weekly": api.create(name="report-weekly", tags=["env:prod"]),
        "report_x": api.create(name="report_x", tags=["env:dev", "team=data"]),
        "reportAx": api.create(name="reportAx", tags=["env:prod", "team=data"]),
        "cleanup": api.create(name="cleanup", tags=["env:prod", "team=data"]),
        "report%": api.create(name="report%", tags=["team=data"]),
    }
    api.call("POST", f"/jobs/{made['report-weekly']['id']}/pause")
    api.call("POST", f"/jobs/{made['cleanup']['id']}/pause")
    other.create(name="report-daily", tags=["env:prod", "team=data"])
    return {name: job["id"] for name, job in made.items()}


def names(items: list[dict[str, Any]]) -> list[str]:
    return [item["name"] for item in items]


def test_every_tag_given_must_match(api: Api, catalogue: dict[str, str]) -> None:
    both = all_pages(api, "/jobs", {"tag": "env:prod,team=data"})  # API Gateway's form of ?tag=a&tag=b
    assert sorted(names(both)) == ["cleanup", "report-daily", "reportAx"]
    assert sorted(names(all_pages(api, "/jobs", {"tag": "env:dev"}))) == ["report_x"]
    assert all_pages(api, "/jobs", {"tag": "env:nowhere"}) == []


def test_status_filters_and_repeats(api: Api, catalogue: dict[str, str]) -> None:
    assert sorted(names(all_pages(api, "/jobs", {"status": "paused"}))) == ["cleanup", "report-weekly"]
    assert len(all_pages(api, "/jobs", {"status": "active,paused"})) == 6
    assert all_pages(api, "/jobs", {"status": "completed"}) == []


def test_name_prefix_is_literal_and_case_sensitive(api: Api, catalogue: dict[str, str]) -> None:
    # `_` and `%` are not wildcards: "report_" must not match "report-daily" nor "reportAx".
    assert names(all_pages(api, "/jobs", {"name_prefix": "report_"})) == ["report_x"]
    assert names(all_pages(api, "/jobs", {"name_prefix": "report%"})) == ["report%"]
    assert sorted(names(all_pages(api, "/jobs", {"name_prefix": "report-"}))) == ["report-daily", "report-weekly"]
    assert all_pages(api, "/jobs", {"name_prefix": "Report"}) == []


def test_filters_combine_and_page_without_gaps_or_repeats(api: Api, catalogue: dict[str, str]) -> None:
    unfiltered = names(all_pages(api, "/jobs", {}, limit=50))
    combined = all_pages(api, "/jobs", {"tag": "team=data", "status": "active", "name_prefix": "report"}, limit=1)
    expected = [name for name in unfiltered if name in {"report-daily", "report_x", "reportAx", "report%"}]
    assert names(combined) == expected  # newest first, each once, across four pages of one


def test_bad_job_filters_are_400s_naming_the_parameter(api: Api) -> None:
    for query, field in [({"status": "deleted"}, "status"), ({"tag": "bad tag"}, "tag"), ({"tag": ""}, "tag"),
                         ({"name_prefix": ""}, "name_prefix"), ({"name_prefix": "a\x00"}, "name_prefix"),
                         ({"tag": ",".join(f"t{i}" for i in range(21))}, "tag")]:
        assert error_field(api.call("GET", "/jobs", query=query)) == (400, field), query


def test_the_filtered_queries_use_their_indexes_on_a_large_tenant(db: Any, api: Api) -> None:
    # 5,000 jobs (one in 500 tagged `rare`) and 5,000 executions, analyzed: the plans a big tenant gets.
    db.execute(
        "INSERT INTO jobs (id, tenant_id, name, schedule, request, retry, status, tags)"
        " SELECT gen_random_uuid(), %s, 'job-' || i, 'rate(1 minute)', '{}', '{}', 'active',"
        " CASE WHEN i %% 500 = 0 THEN ARRAY['rare'] ELSE ARRAY['t' || (i %% 50)] END"
        " FROM generate_series(1, 5000) AS i", (api.tenant_id,))
    db.execute(
        "INSERT INTO executions (id, tenant_id, job_id, scheduled_for, trigger, status)"
        " SELECT gen_random_uuid(), tenant_id, id, now() - interval '1 second' * random() * 86400, 'schedule',"
        " 'succeeded' FROM jobs WHERE tenant_id = %s", (api.tenant_id,))
    db.execute("ANALYZE jobs")
    db.execute("ANALYZE executions")
    live = "tenant_id = %s AND status <> 'deleted'"
    plans = {
        "jobs_tags": f"SELECT id FROM jobs WHERE {live} AND tags @> ARRAY['rare']",
        "jobs_tenant_name": f"SELECT id FROM jobs WHERE {live} AND name LIKE 'job-4999%%'",
        "executions_tenant_newest": "SELECT id FROM executions WHERE tenant_id = %s"
                                    " ORDER BY scheduled_for DESC, id DESC LIMIT 51",
    }
    for index, sql in plans.items():
        plan = "\n".join(row[0] for row in db.execute("EXPLAIN " + sql, (api.tenant_id,)).fetchall())
        assert index in plan, plan


# ---------------------------------------------------------------- GET /executions

@pytest.fixture
def history(api: Api, other: Api, db: Any) -> dict[str, Any]:
    """Executions of two jobs of tenant A (one since deleted) an hour apart, and one of tenant B."""
    first, second = api.create(name="first")["id"], api.create(name="second")["id"]
    base = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
    statuses = ["succeeded", "failed", "succeeded", "lost", "failed", "skipped"]
    rows = [(first if i % 2 == 0 else second, base + timedelta(hours=i), s) for i, s in enumerate(statuses)]
    ids = [insert_execution(db, api.tenant_id, job, at, status) for job, at, status in rows]
    # Two runs of one slot time (of different jobs): the order between them is by id, and stable.
    tie = [insert_execution(db, api.tenant_id, job, base + timedelta(hours=10)) for job in (first, second)]
    foreign_job = other.create()["id"]
    insert_execution(db, other.tenant_id, foreign_job, base + timedelta(hours=3), "failed")
    api.call("DELETE", f"/jobs/{second}")
    return {"first": first, "second": second, "foreign_job": foreign_job, "ids": ids, "tie": tie, "base": base}


def test_executions_across_jobs_newest_slot_first_with_a_stable_tie_break(api: Api, history: dict[str, Any]) -> None:
    items = all_pages(api, "/executions", {}, limit=3)

    assert len(items) == 8  # the deleted job's runs included, the other tenant's not
    tie = sorted(history["tie"], reverse=True)
    assert [item["id"] for item in items] == tie + history["ids"][::-1]
    assert items[0]["scheduled_for"] == "2026-03-01T22:00:00.000Z"


def test_execution_filters(api: Api, history: dict[str, Any]) -> None:
    ids, base = history["ids"], history["base"]

    failed = all_pages(api, "/executions", {"status": "failed"})
    assert [item["id"] for item in failed] == [ids[4], ids[1]]
    assert {item["id"] for item in all_pages(api, "/executions", {"status": "failed,lost"})} == {ids[1], ids[3], ids[4]}
    second = all_pages(api, "/executions", {"job_id": history["second"]})  # deleted since: history is kept
    assert [item["id"] for item in second] == [history["tie"][1], ids[5], ids[3], ids[1]]
    window = {"since": (base + timedelta(hours=1)).isoformat(), "until": "2026-03-01T15:00:00Z"}
    assert [item["id"] for item in all_pages(api, "/executions", window)] == [ids[2], ids[1]]  # until excluded
    combined = all_pages(api, "/executions", {**window, "status": "failed", "job_id": history["second"].upper()})
    assert [item["id"] for item in combined] == [ids[1]]


def test_a_job_id_of_another_tenant_or_of_no_job_matches_nothing(api: Api, other: Api, history: dict[str, Any]) -> None:
    assert all_pages(api, "/executions", {"job_id": history["foreign_job"]}) == []
    assert all_pages(api, "/executions", {"job_id": str(uuid.uuid4())}) == []
    assert [item["job_id"] for item in all_pages(other, "/executions", {})] == [history["foreign_job"]]


def test_a_cursor_of_a_job_execution_list_positions_the_tenant_list(api: Api, history: dict[str, Any]) -> None:
    everything = [item["id"] for item in all_pages(api, "/executions", {})]
    page = api.call("GET", f"/jobs/{history['first']}/executions", query={"limit": "1"}).body
    rest = api.call("GET", "/executions", query={"cursor": page["next_cursor"], "limit": "200"}).body["items"]
    newest_of_first = page["items"][0]["id"]
    assert [item["id"] for item in rest] == everything[everything.index(newest_of_first) + 1:]


@pytest.mark.parametrize(("query", "field"), [
    ({"status": "done"}, "status"),
    ({"job_id": "not-a-uuid"}, "job_id"),
    ({"job_id": "0" * 32}, "job_id"),
    ({"since": "2026-03-01"}, "since"),
    ({"since": "1700000000"}, "since"),
    ({"until": "2026-03-01T12:00:00"}, "until"),
    ({"until": "9999-01-01T00:00:00Z"}, "until"),
    ({"since": "2026-03-01T12:00:00Z", "until": "2026-03-01T12:00:00Z"}, "until"),
    ({"cursor": "bm9wZQ"}, "cursor"),
    ({"limit": "0"}, "limit"),
    ({"jobid": "x"}, "jobid"),
])
def test_bad_execution_filters_are_400s_naming_the_parameter(api: Api, query: dict[str, str], field: str) -> None:
    assert error_field(api.call("GET", "/executions", query=query)) == (400, field)


def test_the_execution_list_needs_a_key(api: Api) -> None:
    assert api.call("GET", "/executions", token=None).status == 401


# ---------------------------------------------------------------- GET /stats

def percentiles(values: list[float]) -> list[float]:
    """percentile_cont's definition: linear interpolation between the closest ranks."""
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return [cuts[49], cuts[94], cuts[98]]


STATS_NOW = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


def test_stats_count_runs_by_status_and_give_fire_lag_percentiles(api: Api, other: Api, db: Any) -> None:
    use_clock(lambda: STATS_NOW.timestamp())  # the window is the API's: one pinned clock for it and the rows
    job = api.create()["id"]
    recent = STATS_NOW - timedelta(minutes=10)
    lags = [float(v) for v in (3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377)]
    for i, lag in enumerate(lags):
        insert_execution(db, api.tenant_id, job, recent - timedelta(seconds=i), "succeeded", lag_ms=lag)
    insert_execution(db, api.tenant_id, job, recent - timedelta(seconds=60), "failed", lag_ms=55)
    lags.append(55.0)
    insert_execution(db, api.tenant_id, job, recent - timedelta(seconds=61), "missed")
    insert_execution(db, api.tenant_id, job, recent - timedelta(seconds=62), "succeeded", "manual", lag_ms=90_000)
    insert_execution(db, api.tenant_id, job, STATS_NOW - timedelta(hours=2), "failed", lag_ms=1)  # outside the window
    insert_execution(db, other.tenant_id, other.create()["id"], recent, "failed", lag_ms=1)  # another tenant's

    reply = api.call("GET", "/stats")

    assert reply.status == 200, reply.body
    body = reply.body
    assert body["window_seconds"] == 3600
    assert {k: v for k, v in body["runs"].items() if v} == {"succeeded": 12, "failed": 1, "missed": 1}
    assert set(body["runs"]) >= {"queued", "running", "retrying", "lost", "skipped", "waiting"}
    lag = body["fire_lag"]
    assert lag["samples"] == 12  # first attempts of scheduled runs: the manual run is not a fire lag
    assert [lag["p50_ms"], lag["p95_ms"], lag["p99_ms"]] == pytest.approx(percentiles(lags))
    since, until = datetime.fromisoformat(body["since"]), datetime.fromisoformat(body["until"])
    assert until - since == timedelta(hours=1)


def test_a_short_window_leaves_older_runs_out_and_an_empty_one_has_no_percentiles(api: Api, db: Any) -> None:
    use_clock(lambda: STATS_NOW.timestamp())
    job = api.create()["id"]
    insert_execution(db, api.tenant_id, job, STATS_NOW - timedelta(minutes=30), "failed", lag_ms=7)

    body = api.call("GET", "/stats", query={"window": "60"}).body

    assert body["window_seconds"] == 60 and sum(body["runs"].values()) == 0
    assert body["fire_lag"] == {"samples": 0, "p50_ms": None, "p95_ms": None, "p99_ms": None}
    wide = api.call("GET", "/stats", query={"window": "86400"}).body
    assert wide["runs"]["failed"] == 1 and wide["fire_lag"]["p99_ms"] == pytest.approx(7)
    assert wide["truncated"] is False


# A week at quota is 60 million runs: the longest window is a day.
@pytest.mark.parametrize("window", ["0", "-5", "86401", "604800", "1.5", "hour", ""])
def test_window_bounds_are_checked(api: Api, window: str) -> None:
    assert error_field(api.call("GET", "/stats", query={"window": window})) == (400, "window")


def test_a_window_with_more_runs_than_one_request_counts_is_cut_to_its_newest_whole_slots(
    api: Api, services: Services, db: Any,
) -> None:
    job = api.create()["id"]
    slots = [STATS_NOW - timedelta(minutes=m) for m in (1, 2, 3, 4)]
    for slot, status in zip(slots, ("succeeded", "failed", "succeeded", "missed")):
        insert_execution(db, api.tenant_id, job, slot, status, lag_ms=10)
    scope = Scope(services.db, api.index, services.settings, api.tenant_id, STATS_NOW)

    result = stats.run_stats(scope, 3600, max_runs=2)

    assert result.truncated and result.since == slots[2] + timedelta(microseconds=1)
    assert {k: v for k, v in result.runs.items() if v} == {"succeeded": 1, "failed": 1}
    assert result.lag_samples == 2
    whole = stats.run_stats(scope, 3600, max_runs=4)
    assert not whole.truncated and sum(whole.runs.values()) == 4 and whole.since == STATS_NOW - timedelta(hours=1)


def test_stats_need_a_key(api: Api) -> None:
    assert api.call("GET", "/stats", token=None).status == 401
