"""H and spread_seconds through the API: validation (400s naming the field), the job's next runs shifted
by its own offset, the index entry that carries it, a PATCH of the spread bumping the version, and the
preview showing the same instants for the same job id."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from croniter import croniter

from tests.integration.api.test_api import PINNED, indexed_spec, ms, pinned
from tests.integration.api_client import Api, job_body
from tests.integration.helpers import executions
from tests.support import score_of
from tickwork.dispatch.poller import Poller
from tickwork.dueindex.entries import job_member
from tickwork.schedule import hashing
from tickwork.timeutil import parse_rfc3339, to_ms
from tickwork.wiring import Services


def error(reply: Any) -> tuple[int, str, str]:
    return reply.status, reply.body["error"]["field"], reply.body["error"]["message"]


def times(values: list[str]) -> list[datetime]:
    return [parse_rfc3339(value) for value in values]


def top_of_hours_after(at: datetime, count: int, offset: int) -> list[datetime]:
    """The next `count` runs of `0 * * * *` shifted by `offset` seconds, strictly after `at`."""
    first = at.replace(minute=0, second=0, microsecond=0) + timedelta(seconds=offset)
    first = first if first > at else first + timedelta(hours=1)
    return [first + timedelta(hours=i) for i in range(count)]


@pytest.mark.parametrize(("fields", "field", "message"), [
    ({"schedule": "*/5 * * * *", "spread_seconds": 301}, "spread_seconds",
     "must be at most the schedule's shortest interval (300 s)"),
    ({"schedule": "rate(1 minute)", "spread_seconds": 61}, "spread_seconds",
     "must be at most the schedule's shortest interval (60 s)"),
    ({"schedule": "H(5-2) * * * *"}, "schedule",
     "minute field: the range of H(a-b) must go from a lower to a higher value"),
    ({"schedule": "0 H/0 * * *"}, "schedule", "hour field: a step must be at least 1"),
    ({"schedule": "1,H * * * *"}, "schedule", "minute field: H stands alone in its field: H, H/n, H(a-b) or H(a-b)/n"),
])
def test_a_bad_spread_or_h_is_a_400_naming_the_field(api: Api, fields: dict[str, Any], field: str,
                                                     message: str) -> None:
    reply = api.call("POST", "/jobs", {**job_body(), **fields})
    assert error(reply) == (400, field, message)


@pytest.mark.parametrize("spread", [-1, 3601, 1.5, "soon", None])
def test_a_spread_out_of_its_type_or_range_is_a_400_naming_it(api: Api, spread: Any) -> None:
    reply = api.call("POST", "/jobs", {**job_body(), "schedule": "0 * * * *", "spread_seconds": spread})
    assert reply.status == 400 and reply.body["error"]["field"] == "spread_seconds", reply.body


def test_a_spread_job_runs_at_its_own_offset_in_every_next_run_and_in_the_index(api: Api, services: Services) -> None:
    at = pinned()
    job = api.create(schedule="0 * * * *", timezone="UTC", spread_seconds=3600)
    offset = hashing.spread_offset_seconds(job["id"], 3600)

    assert job["spread_seconds"] == 3600
    assert times(job["next_fire_times"]) == top_of_hours_after(at, 5, offset)
    assert job["next_run_at"] == job["next_fire_times"][0]
    assert score_of(api.index, job_member(job["id"])) == ms(job["next_run_at"])
    spec = indexed_spec(services, api.index, job["id"])
    assert spec is not None and spec["s"]["offset_ms"] == offset * 1000
    assert api.call("GET", f"/jobs/{job['id']}").body["next_fire_times"] == job["next_fire_times"]


def test_an_h_job_keeps_h_in_its_schedule_and_runs_when_croniter_says_for_its_id(api: Api, services: Services) -> None:
    at = pinned()
    job = api.create(schedule="H H * * *", timezone="UTC")
    assert job["schedule"] == "0 H H * * *"
    expected = croniter("H H * * *", at.replace(tzinfo=None), hash_id=job["id"])
    assert times(job["next_fire_times"]) == [expected.get_next(datetime).replace(tzinfo=UTC) for _ in range(5)]
    spec = indexed_spec(services, api.index, job["id"])
    assert spec is not None and spec["s"]["hash_key"] == job["id"]
    # Unchanged by an update of anything else: the values come from the id alone.
    renamed = api.call("PATCH", f"/jobs/{job['id']}", {"name": "renamed"}).body
    assert renamed["next_fire_times"] == job["next_fire_times"] and renamed["version"] == 1


def test_patching_the_spread_bumps_the_version_and_moves_the_next_run(api: Api, services: Services) -> None:
    at = pinned()
    job = api.create(schedule="0 * * * *", timezone="UTC")
    assert job["spread_seconds"] == 0 and times(job["next_fire_times"])[0] == top_of_hours_after(at, 1, 0)[0]

    updated = api.call("PATCH", f"/jobs/{job['id']}", {"spread_seconds": 1800})
    assert updated.status == 200, updated.body
    offset = hashing.spread_offset_seconds(job["id"], 1800)
    assert (updated.body["version"], updated.body["spread_seconds"]) == (2, 1800)
    assert times(updated.body["next_fire_times"]) == top_of_hours_after(at, 5, offset)
    assert score_of(api.index, job_member(job["id"])) == ms(updated.body["next_run_at"])
    spec = indexed_spec(services, api.index, job["id"])
    assert spec is not None and spec["v"] == 2 and spec["s"]["offset_ms"] == offset * 1000

    same = api.call("PATCH", f"/jobs/{job['id']}", {"spread_seconds": 1800}).body
    assert same["version"] == 2 and same["updated_at"] == updated.body["updated_at"]


def test_a_schedule_shorter_than_the_stored_spread_is_refused_naming_the_spread(api: Api) -> None:
    job = api.create(schedule="0 * * * *", spread_seconds=900)
    reply = api.call("PATCH", f"/jobs/{job['id']}", {"schedule": "*/5 * * * *"})
    assert error(reply) == (400, "spread_seconds", "must be at most the schedule's shortest interval (300 s)")
    both = api.call("PATCH", f"/jobs/{job['id']}", {"schedule": "*/5 * * * *", "spread_seconds": 300})
    assert both.status == 200 and both.body["version"] == 2


def test_the_preview_for_a_job_id_shows_that_jobs_runs(api: Api) -> None:
    pinned()
    job = api.create(schedule="H/15 * * * *", timezone="UTC", spread_seconds=60)
    body = {"schedule": "H/15 * * * *", "timezone": "UTC", "job_id": job["id"], "spread_seconds": 60,
            "after": PINNED.isoformat()}
    reply = api.call("POST", "/schedules/preview", body)
    assert reply.status == 200, reply.body
    assert [t["utc"] for t in reply.body["fire_times"]] == job["next_fire_times"]
    assert reply.body["hash_key"] == job["id"]
    assert reply.body["offset_seconds"] == hashing.spread_offset_seconds(job["id"], 60)


def test_the_preview_without_a_job_uses_the_documented_key_and_says_so(api: Api) -> None:
    reply = api.call("POST", "/schedules/preview", {"schedule": "H * * * *", "after": "2026-01-01T00:00:00Z",
                                                   "count": 1})
    assert reply.status == 200, reply.body
    minute = croniter("H * * * *", datetime(2026, 1, 1), hash_id=hashing.PREVIEW_KEY).get_next(datetime).minute
    assert reply.body["fire_times"][0]["utc"] == f"2026-01-01T00:{minute:02d}:00.000Z"
    assert (reply.body["hash_key"], reply.body["offset_seconds"]) == (hashing.PREVIEW_KEY, 0)
    bad = api.call("POST", "/schedules/preview", {"schedule": "H * * * *", "job_id": "not-a-uuid"})
    assert bad.status == 400 and bad.body["error"]["field"] == "job_id"


def test_the_poller_records_and_dispatches_the_shifted_slot_even_after_an_index_rebuild(
    api: Api, services: Services, invoker: Any,
) -> None:
    """The slot's scheduled_for (the execution's unique key) is the shifted instant, and a rebuild of the index
    from Postgres (the IndexRow path) gives the job the same shifted spec."""
    at = pinned()
    job = api.create(schedule="H/15 * * * *", timezone="UTC", spread_seconds=600)
    slot, following = times(job["next_fire_times"])[:2]
    Poller(services).tick(to_ms(slot) + 50)
    assert [r[1] for r in executions(services, job["id"])] == [slot]
    assert [d.fire_at_ms for d in invoker.dispatches] == [to_ms(slot)]
    assert score_of(api.index, job_member(job["id"])) == to_ms(following)

    for key in services.redis.scan_iter(match="{" + services.settings.namespace + "}:*"):
        services.redis.delete(key)
    result = Poller(services).tick(to_ms(following) + 50)
    assert result.rebuilt and [r[1] for r in executions(services, job["id"])] == [slot, following]
    assert score_of(api.index, job_member(job["id"])) == to_ms(times(job["next_fire_times"])[2])
    assert slot > at and (following - slot) == timedelta(minutes=15)
