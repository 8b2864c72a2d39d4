"""The poller and a job's calendar, against real Postgres and Redis at pinned instants: a slot on an excluded
date recorded skipped with the calendar's name (and the job going on), a next_day slot dispatched at the
instant it moved to, and a calendar changed under the poller counting within its cache's refresh."""
from __future__ import annotations

from datetime import date, datetime, timezone
from typing import Any

from psycopg.types.json import Jsonb

from tests.integration.helpers import due_index, executions, insert_job
from tests.support import score_of
from tickwork.dueindex import specs as dueindex_specs
from tickwork.dispatch.calendars import REFRESH_SECONDS, CalendarCache
from tickwork.dispatch.poller import Poller
from tickwork.dueindex.entries import DueEntry
from tickwork.store import jobs as jobs_store
from tickwork.tenant.calendars import compiled_row
from tickwork.timeutil import to_ms
from tickwork.wiring import Services

CHRISTMAS = datetime(2026, 12, 25, 9, 0, tzinfo=timezone.utc)  # a Friday
BOXING_DAY = datetime(2026, 12, 26, 9, 0, tzinfo=timezone.utc)


def job_with_calendar(services: Services, schedule: str, on_excluded: str, dates: list[str]) -> str:
    """A job at its slot on Christmas, excluding by calendar us-holidays (the given dates)."""
    job_id = insert_job(services, schedule=schedule, next_run_at=CHRISTMAS, index=False)
    with services.db.connection() as conn:
        tenant_id = conn.execute("SELECT tenant_id::text FROM jobs WHERE id = %s", (job_id,)).fetchone()[0]
        row = compiled_row("us-holidays", dates, None, CHRISTMAS)
        conn.execute("INSERT INTO calendars (tenant_id, name, dates, compiled) VALUES (%s, %s, %s, %s)",
                     (tenant_id, row.name, row.dates, Jsonb(row.compiled)))
        conn.execute("UPDATE jobs SET calendar = %s WHERE id = %s",
                     (Jsonb({"exclude": ["us-holidays"], "on_excluded": on_excluded}), job_id))
        job = jobs_store.get_jobs(conn, [job_id])[0]
    dueindex_specs.index_job(due_index(services), job)
    return job_id


def poller(services: Services, clock: Any = None) -> Poller:
    polling = Poller(services)
    polling.calendars = CalendarCache(clock or (lambda: 0.0))  # each test its own cache
    return polling


def last_errors(services: Services, job_id: str) -> list[tuple[Any, ...]]:
    with services.db.connection() as conn:
        return conn.execute("SELECT scheduled_for, status, last_error, finished_at IS NOT NULL FROM executions"
                            " WHERE job_id = %s ORDER BY scheduled_for", (job_id,)).fetchall()


def test_a_slot_on_an_excluded_date_is_recorded_skipped_and_the_job_goes_on(services: Services, invoker) -> None:
    job_id = job_with_calendar(services, "0 0 9 * * *", "skip", ["2026-12-25"])
    result = poller(services).tick(to_ms(CHRISTMAS) + 50)
    assert last_errors(services, job_id) == [
        (CHRISTMAS, "skipped", "skipped: 2026-12-25 is excluded by calendar us-holidays", True)]
    assert invoker.dispatches == [] and result.dispatched == 0
    assert score_of(due_index(services), f"j:{job_id}") == to_ms(BOXING_DAY)
    poller(services).tick(to_ms(BOXING_DAY) + 50)
    assert [(r[1], r[2]) for r in executions(services, job_id)] == [(CHRISTMAS, "skipped"), (BOXING_DAY, "queued")]
    assert [d.fire_at_ms for d in invoker.dispatches] == [to_ms(BOXING_DAY)]


def test_next_day_dispatches_the_moved_run_at_the_instant_it_moved_to(services: Services, invoker) -> None:
    # Every Friday at 09:00; Christmas is excluded: that run moves to Saturday 09:00, where the job has none.
    job_id = job_with_calendar(services, "0 0 9 * * FRI", "next_day", ["2026-12-25"])
    polling = poller(services)
    polling.tick(to_ms(CHRISTMAS) + 50)  # its score was the Friday slot: moved on, nothing recorded
    assert executions(services, job_id) == [] and invoker.dispatches == []
    assert score_of(due_index(services), f"j:{job_id}") == to_ms(BOXING_DAY)
    with services.db.connection() as conn:
        assert jobs_store.get_jobs(conn, [job_id])[0].next_run_at == BOXING_DAY
    polling.tick(to_ms(BOXING_DAY) + 50)
    assert [(r[1], r[2]) for r in executions(services, job_id)] == [(BOXING_DAY, "queued")]
    assert [d.fire_at_ms for d in invoker.dispatches] == [to_ms(BOXING_DAY)]
    assert score_of(due_index(services), f"j:{job_id}") == to_ms(datetime(2027, 1, 1, 9, tzinfo=timezone.utc))


def test_a_calendar_changed_under_the_poller_counts_once_its_cache_refreshes(services: Services, invoker) -> None:
    job_id = job_with_calendar(services, "0 0 9 * * *", "skip", ["2026-12-24"])
    with services.db.connection() as conn:
        tenant_id = jobs_store.get_jobs(conn, [job_id])[0].tenant_id
    entry = DueEntry(f"j:{job_id}", to_ms(CHRISTMAS), {"v": 1, "t": tenant_id, "c": {"exclude": ["us-holidays"]}})
    now = [0.0]
    cache = CalendarCache(lambda: now[0])
    key = (tenant_id, "us-holidays")
    assert cache.resolve(services.db, [entry]).calendars[key].dates == {date(2026, 12, 24)}
    with services.db.connection() as conn:
        row = compiled_row("us-holidays", ["2026-12-25"], None, CHRISTMAS)
        conn.execute("UPDATE calendars SET compiled = %s, updated_at = now() WHERE name = 'us-holidays'",
                     (Jsonb(row.compiled),))
    now[0] = REFRESH_SECONDS - 1
    assert cache.resolve(services.db, [entry]).calendars[key].dates == {date(2026, 12, 24)}  # no statement meanwhile
    now[0] = REFRESH_SECONDS
    assert cache.resolve(services.db, [entry]).calendars[key].dates == {date(2026, 12, 25)}
    polling = poller(services)
    polling.calendars = cache
    polling.tick(to_ms(CHRISTMAS) + 50)
    assert [(r[1], r[2]) for r in executions(services, job_id)] == [(CHRISTMAS, "skipped")]


def test_a_calendar_stored_out_of_bounds_by_the_old_release_is_read_tolerantly_and_the_job_goes_on(
    services: Services, invoker, caplog,
) -> None:
    """The issue's calendar (DTSTART 9999-12-31, two days) as the release before the bounds stored it, beside
    2,000 rules that never match and Christmas: the poller's cache leaves out (and logs) what is out of bounds,
    Christmas still excludes, and a job every second with that calendar runs tick after tick (it raised
    OverflowError on every tick, its next run frozen)."""
    daily = job_with_calendar(services, "0 0 9 * * *", "skip", [])
    every_second = insert_job(services, schedule="* * * * * *", next_run_at=BOXING_DAY, index=False)
    with services.db.connection() as conn:
        tenant_id = jobs_store.get_jobs(conn, [daily])[0].tenant_id
        conn.execute("UPDATE calendars SET compiled = %s WHERE name = 'us-holidays'", (Jsonb({"dates": [], "events": [
            {"start": "9999-12-31", "days": 2},
            {"start": "2026-01-01", "days": 1, "rrules": ["FREQ=WEEKLY;BYMONTH=2;BYMONTHDAY=30"] * 2000},
            {"start": "2020-12-25", "days": 1, "rrules": ["FREQ=YEARLY"]}]}),))
        conn.execute("UPDATE jobs SET calendar = %s WHERE id = %s",
                     (Jsonb({"exclude": ["us-holidays"], "on_excluded": "skip"}), every_second))
        job = jobs_store.get_jobs(conn, [every_second])[0]
    dueindex_specs.index_job(due_index(services), job)
    caplog.set_level("WARNING")
    polling = poller(services)
    polling.tick(to_ms(CHRISTMAS) + 50)
    for second in range(3):
        polling.tick(to_ms(BOXING_DAY) + second * 1000 + 50)
    assert [(r[1], r[2]) for r in executions(services, daily)] == [(CHRISTMAS, "skipped"), (BOXING_DAY, "queued")]
    assert [(r[1], r[2]) for r in executions(services, every_second)][:3] == [
        (BOXING_DAY.replace(second=s), "queued") for s in range(3)]
    logged = [r for r in caplog.records if r.getMessage().startswith("calendar holds what is out of bounds")]
    assert {(r.tenant_id, r.calendar) for r in logged} == {(str(tenant_id), "us-holidays")}
    assert "event 1: DTSTART outside 1970-01-01..2200-12-31; left out" in logged[0].left_out
