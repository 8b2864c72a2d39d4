"""The quarantine's pure parts (tickwork.dispatch.quarantine): a batch plans around an entry whose planning raises
(its schedule, its calendar, its member), entries of unknown kinds are left alone, a failing batch call is
split down to the items that fail on their own, and the backoff, reasons and release are what the contract says."""
from __future__ import annotations

from datetime import date, datetime, timezone

import psycopg
import pytest
import redis

from tickwork.calendars.rules import Calendar
from tickwork.dispatch import quarantine
from tickwork.dispatch.backlog import BacklogShares, Cursor
from tickwork.dispatch.planning import plan_batch
from tickwork.dispatch.quarantine import MAX_FAILED_CALLS, isolated
from tickwork.dueindex.entries import DueEntry
from tickwork.models import Dispatch, HttpRequest, Job, RetryPolicy
from tickwork.rules.quarantine import (
    BACKOFF_MS,
    MAX_BACKOFF_MS,
    MAX_REASON,
    Failure,
    Step,
    backoff_ms,
    backoff_steps,
    reason,
    released,
    shown_status,
)
from tickwork.schedule.engine import parse_schedule
from tickwork.schedule.specs import index_spec

T0 = 1_796_040_000_000  # 2026-11-30T12:00:00Z
EVERY_SECOND = parse_schedule("* * * * * *", "UTC")


class Bomb(Calendar):
    """A calendar whose expansion raises, as the issue's did (an event's second day past date.max) before
    stored calendars were read within bounds: whatever a calendar comes to raise, only its jobs fail."""

    def excludes(self, day: date) -> bool:
        raise OverflowError("date value out of range")


BOMB = Bomb("hol")


def job(n: int, tenant: str = "tenant-a", **spec_changes: object) -> DueEntry:
    spec = {**index_spec(EVERY_SECOND, 1, tenant_id=tenant), **spec_changes}
    return DueEntry(f"j:job-{n}", T0, spec)


def planned(entries: list[DueEntry], **kwargs: object) -> list[str]:
    return [claim.member for claim, _ in plan_batch(entries, T0 + 500, **kwargs).claims]  # type: ignore[arg-type]


def test_a_job_whose_schedule_raises_is_set_aside_and_the_batch_planned() -> None:
    broken = job(1, cw="five minutes")  # a spec Redis holds corrupted: its catch-up window is not a number
    plan = plan_batch([job(0), broken, job(2)], T0 + 500)
    assert [claim.member for claim, _ in plan.claims] == ["j:job-0", "j:job-2"]
    assert plan.failed == [Failure("j:job-1", T0, "ValueError while planning its next slot", "tenant-a", "job-1")]


def test_a_job_whose_calendar_raises_is_set_aside_and_only_it() -> None:
    # Two jobs of tenant A name the bomb, one names a good calendar; tenant B's jobs name none.
    bombed = {"exclude": ["hol"], "on_excluded": "skip"}
    entries = [job(0, c=bombed), job(1, tenant="tenant-b"), job(2, c={"exclude": ["ok"]}), job(3, c=bombed),
               job(4, tenant="tenant-b")]
    calendars = {("tenant-a", "hol"): BOMB, ("tenant-a", "ok"): Calendar("ok", frozenset({date(2031, 1, 1)}))}
    plan = plan_batch(entries, T0 + 500, calendars=calendars)
    assert [claim.member for claim, _ in plan.claims] == ["j:job-1", "j:job-2", "j:job-4"]
    assert [(f.member, f.reason) for f in plan.failed] == [
        ("j:job-0", "OverflowError while applying its calendars"), ("j:job-3", "OverflowError while applying its calendars")]
    assert plan.failed_calendars == {("tenant-a", "hol")}  # read again next time: one may have changed since


def test_a_calendar_that_could_not_be_read_sets_aside_the_jobs_naming_it() -> None:
    entries = [job(0, c={"exclude": ["broken"]}), job(1), job(2, c={"exclude": ["ok", "broken"]})]
    plan = plan_batch(entries, T0 + 500, calendars={}, unreadable={("tenant-a", "broken"): KeyError("start")})
    assert [claim.member for claim, _ in plan.claims] == ["j:job-1"]
    assert {f.reason for f in plan.failed} == {"KeyError while reading a calendar it excludes by"}


def test_a_malformed_one_shot_member_is_set_aside_and_an_unknown_kind_left_alone() -> None:
    entries = [DueEntry("e:run-1:notanumber", T0, None), job(0), DueEntry("x:newer-kind", T0, None),
               DueEntry("n:note-1:1", T0, None), DueEntry("e:run-2", T0, None)]
    plan = plan_batch(entries, T0 + 500)
    assert [target for _, target in plan.claims][1] == Dispatch("note-1", 1, T0, "notification")
    assert [claim.member for claim, _ in plan.claims] == ["j:job-0", "n:note-1:1"]
    assert [(f.member, f.reason, f.job_id) for f in plan.failed] == [
        ("e:run-1:notanumber", "ValueError while reading its due-index entry", None),
        ("e:run-2", "ValueError while reading its due-index entry", None)]
    assert plan.unknown == [entries[2]] and plan.missing_specs == []


def test_a_spec_whose_calendars_are_not_what_the_api_writes_fails_alone() -> None:
    entries = [job(0, c=["not", "a", "mapping"]), job(1, c={"exclude": [{"a": 1}]}), job(2)]
    plan = plan_batch(entries, T0 + 500, calendars={})
    assert [claim.member for claim, _ in plan.claims] == ["j:job-2"]
    assert [f.member for f in plan.failed] == ["j:job-0", "j:job-1"] and plan.failed_calendars == set()


def test_a_reason_names_the_step_and_the_type_never_the_message() -> None:
    said = reason(Step.PLAN, ValueError("Authorization: Bearer tenant-secret " + "x" * 500))
    assert said == "ValueError while planning its next slot"
    assert "secret" not in said and len(reason(Step.PLAN, type("E" * 300, (Exception,), {})())) == MAX_REASON


def test_the_backoff_doubles_from_5_s_to_an_hour() -> None:
    assert [backoff_ms(n) for n in (1, 2, 3, 4)] == [5_000, 10_000, 20_000, 40_000]
    assert backoff_ms(0) == BACKOFF_MS and backoff_ms(11) == backoff_ms(10_000) == MAX_BACKOFF_MS == 3_600_000
    steps = backoff_steps()
    assert steps == [backoff_ms(n) for n in range(1, len(steps) + 1)] and steps[-1] == MAX_BACKOFF_MS
    assert len(steps) == 11 and steps[-2] < MAX_BACKOFF_MS


# ------------------------------------------------------------------------------ splitting a batch call

def test_a_failing_call_is_split_down_to_the_items_that_fail_alone() -> None:
    calls: list[list[int]] = []

    def write(part: list[int]) -> int:
        calls.append(list(part))
        if {13, 77} & set(part):
            raise ValueError("rejected")
        return len(part)

    done = isolated(list(range(100)), write)
    assert sorted(item for item, _ in done.failed) == [13, 77]
    assert sum(done.results) == 98 and done.calls == len(calls)
    assert done.calls <= 2 * 2 * 7 + 1  # about 2 k log2(n) calls for k bad items among n
    assert calls[0] == list(range(100))


def test_a_failure_of_the_infrastructure_fails_the_call_whole() -> None:
    for systemic in (psycopg.OperationalError("gone"), redis.exceptions.ConnectionError("reset"),
                     redis.exceptions.TimeoutError("slow"), redis.exceptions.ReadOnlyError("a replica"),
                     psycopg.errors.ReadOnlySqlTransaction("failing over")):
        def write(part: list[int], error: Exception = systemic) -> None:
            raise error
        with pytest.raises(type(systemic)):
            isolated([1, 2, 3], write)

    class Death(BaseException):
        pass

    def die(part: list[int]) -> None:
        raise Death()

    with pytest.raises(Death):
        isolated([1, 2], die)


def test_past_its_bound_a_bisection_sets_aside_what_still_fails_together() -> None:
    calls = []

    def write(part: list[int]) -> None:
        calls.append(len(part))
        raise ValueError("everything fails")

    done = isolated(list(range(1000)), write)
    assert sorted(item for item, _ in done.failed) == list(range(1000))
    assert len(calls) <= MAX_FAILED_CALLS + 10  # the parts split off before the bound are each tried once
    assert quarantine.MAX_FAILED_CALLS == 64


# ------------------------------------------------------------------------------ release and shown state

def _job_row(**changes: object) -> Job:
    at = datetime(2026, 11, 30, 11, 0, tzinfo=timezone.utc)
    row = Job(id="00000000-0000-4000-8000-000000000001", tenant_id="t", name="p", schedule="*/10 * * * * *",
              timezone="UTC", start_at=None, end_at=None, request=HttpRequest(url="https://example.com/"),
              retry=RetryPolicy(), status="active", next_run_at=at, version=1, created_at=at, updated_at=at,
              error_reason="OverflowError while applying its calendars", errored_at=at, error_count=3,
              retry_errored_at=at)
    return Job(**{**row.__dict__, **changes})


def test_a_released_job_is_cleared_and_back_at_its_first_slot_from_now() -> None:
    now = datetime(2026, 11, 30, 12, 0, 3, tzinfo=timezone.utc)
    freed = released(_job_row(), now)
    assert (freed.error_reason, freed.errored_at, freed.error_count, freed.retry_errored_at) == (None,) * 4
    assert freed.next_run_at == datetime(2026, 11, 30, 12, 0, 10, tzinfo=timezone.utc) and freed.status == "active"
    paused = released(_job_row(status="paused", next_run_at=None), now)
    assert paused.next_run_at is None and paused.error_reason is None and paused.status == "paused"
    healthy = _job_row(error_reason=None, errored_at=None, error_count=None, retry_errored_at=None)
    assert released(healthy, now) is healthy


def test_only_an_active_job_in_quarantine_shows_errored() -> None:
    assert shown_status(_job_row()) == "errored"
    assert shown_status(_job_row(status="paused")) == "paused"
    assert shown_status(_job_row(error_reason=None)) == "active"


# ------------------------------------------------------------------------------ unknown kinds in the backlog

def test_the_backlog_passes_over_unknown_kinds_and_the_next_page_starts_past_them() -> None:
    unknown = [DueEntry(f"z:{n}", T0, None) for n in range(3)]
    page = [*unknown, job(0)]
    taken = BacklogShares(per_tenant=10).take(page)
    assert taken == [page[3]]
    assert Cursor().after(page, taken) == Cursor(T0, 3)
    assert Cursor(T0 - 5000).past(unknown, unknown) == Cursor(T0, 3)
    assert Cursor(T0, 3).past([DueEntry("z:9", T0, None)], [DueEntry("z:9", T0, None)]) == Cursor(T0, 4)
