"""A poisoned due-index entry against real Postgres and Redis, at pinned instants (tickwork.dispatch.quarantine).

The issue's session first: a calendar stored without the API's checks made one tenant's job raise in planning
on every tick; after a 10 s pause it sat at the head of the backlog and no other job ran again. Then the
contract, with the failure injected at a seam of the poller's planning (a calendar holding POISON raises there,
as that one did, whatever the calendar module later makes of stored calendars): every other job (another
tenant's too) is claimed in the same tick, the poisoned one is moved out of reach and shows `errored` until a
change to it, to its calendar, an operator or its own next success releases it, and a rebuild of the index
from Postgres keeps it out of reach."""
from __future__ import annotations

import json
import uuid
from dataclasses import replace
from datetime import date, datetime, timedelta, timezone
from typing import Any, Callable, Sequence

import pytest

from tests.conftest import RecordingInvoker
from tests.integration.api_client import Api, job_body, use_clock
from tests.support import mark_built, score_of
from tickwork.api.admin import handle_admin
from tickwork.calendars.rules import Calendar
from tickwork.dispatch import planning
from tickwork.dispatch.calendars import CalendarCache
from tickwork.dispatch.poller import Poller
from tickwork.dueindex.reconcile import rewind_unrecorded_claims
from tickwork.schedule.excluded import ExcludingSchedule
from tickwork.store import calendars as calendars_store
from tickwork.store.calendars import CalendarRow
from tickwork.store.tenants import create_api_key, create_tenant
from tickwork.timeutil import from_ms, parse_rfc3339, rfc3339, to_ms
from tickwork.wiring import Services

T0 = datetime(2027, 3, 1, 12, 0, 0, tzinfo=timezone.utc)
PAUSE = timedelta(seconds=10)
# The issue's calendar: an all-day event on the last day there is, two days long (its second is past date.max).
BOMB = {"dates": [], "events": [{"start": "9999-12-31", "days": 2}]}
POISON = date(2099, 9, 9)  # a calendar holding this date raises in the poller's planning (the `poison` fixture)
REASON = "OverflowError while applying its calendars"


@pytest.fixture
def clock() -> list[float]:
    """The API's clock (epoch seconds), pinned; a test moves it."""
    now = [T0.timestamp()]
    use_clock(lambda: now[0])
    return now


@pytest.fixture
def other(api: Api, db: Any) -> Api:
    """A second tenant, whose jobs the first one's bad calendar must never stop."""
    tenant_id = create_tenant(db, "tenant-b")
    return Api(api.handler, create_api_key(db, tenant_id), tenant_id, api.index)


@pytest.fixture
def polling(services: Services) -> Poller:
    """One poller for the test's ticks: its planning never runs out of time, its calendar cache is its own."""
    poller = Poller(services, plan_seconds=60.0, clock=lambda: 0.0)
    poller.calendars = CalendarCache(lambda: 0.0)
    return poller


class _Exploding(ExcludingSchedule):
    """The poller's calendars, raising as the issue's did when one holds POISON."""

    def __init__(self, base: Any, calendars: Sequence[Calendar], on_excluded: str) -> None:
        super().__init__(base, calendars, on_excluded)
        self.poisoned = any(POISON in calendar.dates for calendar in calendars)

    def next_after_ms(self, after_ms: int) -> int | None:
        if self.poisoned:
            raise OverflowError("date value out of range")
        return super().next_after_ms(after_ms)


@pytest.fixture
def poison(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(planning, "ExcludingSchedule", _Exploding)


def poisoned(api: Api, db: Any, dates: list[str] | None = None, compiled: dict[str, Any] | None = None,
             ) -> dict[str, Any]:
    """Tenant A's every-second job `p` (key `p`) excluding by calendar `hol` (`dates`); `compiled`: what `hol`
    is then replaced by in Postgres, around the API."""
    assert api.call("PUT", "/calendars/hol", {"dates": dates or [POISON.isoformat()]}).status == 201
    job = api.call("PUT", "/jobs/by-key/p", p_body())
    assert job.status == 201, job.body
    if compiled is not None:
        calendars_store.put(db, api.tenant_id, CalendarRow("hol", [], None, compiled, T0, T0))
    return job.body


def p_body(**changes: Any) -> dict[str, Any]:
    return job_body(name="p", schedule="* * * * * *", timezone="UTC", calendar={"exclude": ["hol"]}, **changes)


def every_two_seconds(api: Api) -> dict[str, Any]:
    job = api.call("POST", "/jobs", job_body(name="ping", schedule="*/2 * * * * *", timezone="UTC"))
    assert job.status == 201, job.body
    return job.body


def latest_and_next(ping: dict[str, Any], now_ms: int) -> list[int]:
    """The slots of the every-2-s job a tick at `now_ms` dispatches after a pause: its latest slot (catch-up
    `latest`) and the next one, within the lookahead."""
    first = to_ms(parse_rfc3339(ping["next_run_at"]))
    latest = first + (now_ms - first) // 2000 * 2000
    return [latest, latest + 2000]


def test_the_issues_session_a_stored_calendar_that_raises_stops_no_other_job_after_a_pause(
    api: Api, other: Api, services: Services, polling: Poller, invoker: RecordingInvoker, db: Any,
    clock: list[float],
) -> None:
    bad, ping = poisoned(api, db, ["2031-01-01"], compiled=BOMB), every_two_seconds(other)
    mark_built(services.index, to_ms(T0))
    now_ms = to_ms(parse_rfc3339(bad["next_run_at"]) + PAUSE) + 500  # both jobs are backlog, the bad one first
    polling.tick(now_ms)  # raised OverflowError, and the backlog stopped here for good
    ran = {(d.fire_at_ms, d.execution_id) for d in invoker.dispatches}
    assert {slot for slot, _ in ran} >= set(latest_and_next(ping, now_ms))  # the other tenant's, in this tick
    # The bad one no longer heads the backlog: set aside, or planned (the calendar read within its bounds).
    assert score_of(services.index, f"j:{bad['id']}") > now_ms


def after_a_pause(api: Api, other: Api, services: Services, polling: Poller, db: Any,
                  ) -> tuple[dict[str, Any], dict[str, Any], int]:
    """The session with the poison injected: the poisoned job and another tenant's, ticked once after a 10 s
    pause; returns both jobs and the tick's instant."""
    bad, ping = poisoned(api, db), every_two_seconds(other)
    mark_built(services.index, to_ms(T0))
    now_ms = to_ms(parse_rfc3339(bad["next_run_at"]) + PAUSE) + 500
    assert polling.tick(now_ms).quarantined == 1
    return bad, ping, now_ms


def error_columns(db: Any, job_id: str) -> tuple[Any, ...]:
    return db.execute("SELECT status, error_reason, errored_at, error_count, retry_errored_at FROM jobs"
                      " WHERE id = %s", (job_id,)).fetchone()


def after_a_pause(api: Api, other: Api, services: Services, polling: Poller, db: Any,
                  ) -> tuple[dict[str, Any], dict[str, Any], int]:
    """The issue's session: the poisoned job and another tenant's, ticked once after a 10 s pause; returns
    both jobs and the tick's instant."""
    bad, ping = poisoned(api, db), every_two_seconds(other)
    mark_built(services.index, to_ms(T0))
    now_ms = to_ms(parse_rfc3339(bad["next_run_at"]) + PAUSE) + 500  # both jobs are backlog, the bad one first
    result = polling.tick(now_ms)
    assert result.quarantined == 1
    return bad, ping, now_ms


def test_a_poisoned_job_at_the_head_of_the_backlog_is_set_aside_and_says_why(
    api: Api, other: Api, services: Services, polling: Poller, invoker: RecordingInvoker, db: Any,
    clock: list[float], poison: None, capsys: pytest.CaptureFixture[str],
) -> None:
    bad, ping, now_ms = after_a_pause(api, other, services, polling, db)

    # The other tenant's job ran in this very tick: its latest slot (catch-up `latest`) and the next one ahead.
    assert sorted(d.fire_at_ms for d in invoker.dispatches) == latest_and_next(ping, now_ms)
    assert score_of(services.index, f"j:{ping['id']}") == latest_and_next(ping, now_ms)[1] + 2000
    # The poisoned one stays in the due set, out of the claimable range for 5 s, and says why.
    assert score_of(services.index, f"j:{bad['id']}") == now_ms + 5_000
    assert error_columns(db, bad["id"]) == ("active", REASON, from_ms(now_ms), 1, from_ms(now_ms + 5_000))
    shown = api.call("GET", f"/jobs/{bad['id']}").body
    assert (shown["status"], shown["error_reason"], shown["errored_at"]) == ("errored", REASON, rfc3339(from_ms(now_ms)))
    assert [job["id"] for job in api.call("GET", "/jobs", query={"status": "errored"}).body["items"]] == [bad["id"]]
    assert api.call("GET", "/jobs", query={"status": "active"}).body["items"] == []
    assert other.call("GET", f"/jobs/{ping['id']}").body["status"] == "active"
    logged = [json.loads(line) for line in capsys.readouterr().out.splitlines() if "quarantined" in line]
    assert [(e["member"], e["job_id"], e["tenant_id"], e["reason"], e["failures"]) for e in logged] == [
        (f"j:{bad['id']}", bad["id"], api.tenant_id, REASON, 1)]

    # Tried again at its retry: it fails again, and waits twice as long; its streak's start is kept.
    again_ms = now_ms + 5_000
    assert polling.tick(again_ms).quarantined == 1
    assert score_of(services.index, f"j:{bad['id']}") == again_ms + 10_000
    assert error_columns(db, bad["id"])[2:] == (from_ms(now_ms), 2, from_ms(again_ms + 10_000))


Release = Callable[[Api, Services, float, dict[str, Any]], None]


def _patch(api: Api, services: Services, now: float, job: dict[str, Any]) -> None:
    assert api.call("PATCH", f"/jobs/{job['id']}", {"description": "looked at"}).status == 200


def _put_by_key(api: Api, services: Services, now: float, job: dict[str, Any]) -> None:
    assert api.call("PUT", "/jobs/by-key/p", p_body()).status == 200  # the same body: a release all the same


def _resume(api: Api, services: Services, now: float, job: dict[str, Any]) -> None:
    assert api.call("POST", f"/jobs/{job['id']}/resume").status == 200  # resuming an errored job tries it again


def _pause_and_resume(api: Api, services: Services, now: float, job: dict[str, Any]) -> None:
    assert api.call("POST", f"/jobs/{job['id']}/pause").body["status"] == "paused"
    assert api.call("POST", f"/jobs/{job['id']}/resume").status == 200


def _calendar(api: Api, services: Services, now: float, job: dict[str, Any]) -> None:
    assert api.call("PUT", "/calendars/hol", {"dates": ["2031-01-02"]}).status == 200  # POISON no longer in it


def _operator(target: str) -> Release:
    def release(api: Api, services: Services, now: float, job: dict[str, Any]) -> None:
        event = {"admin": "release-quarantine", **({"job": job["id"]} if target == "job" else {"tenant": "tenant-a"})}
        answer = handle_admin(replace(services, clock=lambda: now), event)
        assert answer == {"released": [job["id"]], "count": 1, "more": False}
    return release


RELEASES: dict[str, Release] = {
    "PATCH": _patch, "PUT by key": _put_by_key, "resume": _resume, "pause and resume": _pause_and_resume,
    "calendar change": _calendar, "operator, the job": _operator("job"), "operator, the tenant": _operator("tenant")}


@pytest.mark.parametrize("how", list(RELEASES))
def test_a_change_to_the_job_its_calendar_or_an_operator_releases_it_at_its_next_slot_from_now(
    api: Api, other: Api, services: Services, polling: Poller, db: Any, clock: list[float], poison: None, how: str,
) -> None:
    bad, _, now_ms = after_a_pause(api, other, services, polling, db)
    later_ms = now_ms + 1_250  # still in quarantine
    clock[0] = later_ms / 1000
    RELEASES[how](api, services, clock[0], bad)

    shown = api.call("GET", f"/jobs/{bad['id']}").body
    assert (shown["status"], shown["error_reason"], shown["errored_at"]) == ("active", None, None)
    next_slot = (later_ms // 1000 + 1) * 1000  # every second: the first whole second after now
    assert shown["next_run_at"] == rfc3339(from_ms(next_slot))
    assert score_of(services.index, f"j:{bad['id']}") == next_slot
    assert error_columns(db, bad["id"])[1:] == (None, None, None, None)


def test_a_fixed_calendar_heals_the_job_at_its_retry_without_anyone_releasing_it(
    api: Api, other: Api, services: Services, polling: Poller, invoker: RecordingInvoker, db: Any, clock: list[float],
    poison: None,
) -> None:
    bad, _, now_ms = after_a_pause(api, other, services, polling, db)
    fixed = CalendarRow("hol", [date(2031, 1, 1)], None, {"dates": ["2031-01-01"]}, T0, T0 + PAUSE)
    calendars_store.put(db, api.tenant_id, fixed)  # around the API: nothing releases the job
    retry_ms = now_ms + 5_000
    result = polling.tick(retry_ms)  # the calendar a job failed with is read again, not taken from the cache
    assert result.quarantined == 0
    assert error_columns(db, bad["id"])[1:] == (None, None, None, None)  # its slot recorded: the quarantine ends
    assert api.call("GET", f"/jobs/{bad['id']}").body["status"] == "active"
    stuck = to_ms(parse_rfc3339(bad["next_run_at"]))  # its catch-up policy fires the latest slot it missed
    assert (retry_ms - 500) // 1000 * 1000 in {d.fire_at_ms for d in invoker.dispatches}
    assert score_of(services.index, f"j:{bad['id']}") > retry_ms > stuck


def test_a_rebuild_from_postgres_keeps_it_out_of_reach_and_maintenance_does_not_rewind_it(
    api: Api, other: Api, services: Services, polling: Poller, db: Any, clock: list[float], poison: None,
) -> None:
    bad, ping, now_ms = after_a_pause(api, other, services, polling, db)
    shard = services.index.shard_of_job(bad["id"])
    services.redis.delete(*shard.keys())  # a failover to an empty replica
    result = polling.tick(now_ms + 1_000)
    assert result.rebuilt and result.quarantined == 0
    assert score_of(services.index, f"j:{bad['id']}") == now_ms + 5_000  # its retry, from Postgres
    with services.db.connection() as conn:
        assert rewind_unrecorded_claims(conn, services.index, from_ms(now_ms + 60_000)) == 0
    assert score_of(services.index, f"j:{bad['id']}") == now_ms + 5_000
    assert score_of(services.index, f"j:{ping['id']}") is not None


def test_the_operators_release_names_one_job_or_one_tenant(api: Api, services: Services) -> None:
    def release(**fields: Any) -> dict[str, Any]:
        return handle_admin(services, {"admin": "release-quarantine", **fields})

    for fields, status, field in (({}, 400, "job"), ({"job": str(uuid.uuid4()), "tenant": "tenant-a"}, 400, "job"),
                                  ({"job": "j:1"}, 400, "job"), ({"tenant": "nobody"}, 404, "tenant"),
                                  ({"tenant": "tenant-a", "force": True}, 400, "force")):
        answer = release(**fields)
        assert (answer["statusCode"], answer["error"]["field"]) == (status, field), fields
    assert release(job=str(uuid.uuid4())) == {"released": [], "count": 0, "more": False}  # none in quarantine
    assert release(tenant="tenant-a") == {"released": [], "count": 0, "more": False}
