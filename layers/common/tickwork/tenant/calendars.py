"""The calendars service: a tenant's named holiday calendars, and what they do to the schedules of the jobs
that exclude by them (tickwork.schedule.excluded). Every call acts for one tenant (`Scope`).

A calendar is explicit `dates` and/or an iCalendar text of all-day events (tickwork.calendars.ical), stored
with its compiled form, which is what jobs and the poller read. Replacing a calendar re-aims the jobs that
move their slots by it (`next_day`): their next run is computed again, so a date newly excluded or freed
counts from the next run on. Deleting one that a live job uses is a 409 naming the jobs.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from typing import Any, Sequence

from tickwork.calendars.bounds import HORIZON_YEARS
from tickwork.calendars.checks import bounded_dates
from tickwork.calendars.events import Event
from tickwork.calendars.ical import parse_ical
from tickwork.calendars.rules import Calendar
from tickwork.errors import ConflictError, InvalidInputError, NotFoundError
from tickwork.models import CalendarRef, Job
from tickwork.rules.quarantine import released
from tickwork.dueindex import specs as dueindex_specs
from tickwork.schedule import specs as scheduling
from tickwork.schedule.engine import Schedule
from tickwork.schedule.excluded import ExcludingSchedule, SlotDetail, with_calendars
from tickwork.scope import Scope
from tickwork.store import calendars as store
from tickwork.store import jobs as jobs_store
from tickwork.store.calendars import CalendarRow
from tickwork.tenant import audit
from tickwork.vocab import AuditAction, JobStatus, OnExcluded

# Names as tags spell them, without `:`, `/` or `=`: `us-holidays`, `uk_bank.2026`.
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MAX_CALENDARS = 100
MAX_DATES = 1000
MAX_ICAL_BYTES = 256 * 1024
# Calendars one job may exclude by.
MAX_EXCLUDE = 10
# Jobs a 409 for deleting a calendar still in use names.
_NAMED_JOBS = 5
# A calendar's next dates as its detail lists them, and how many years ahead its events are expanded for
# them (one expansion a year: a calendar whose events have ended costs this many): its horizon.
UPCOMING = 10
UPCOMING_YEARS = HORIZON_YEARS
# Jobs using it that a calendar's detail lists.
USERS_LISTED = 20
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$", re.ASCII)
_MS = timedelta(milliseconds=1)


@dataclass(frozen=True)
class CalendarInUse:
    """A calendar with its next excluded dates (from today, UTC, on), the first jobs that exclude by it, and
    what of it was left out as out of bounds (a calendar stored by an older release)."""

    row: CalendarRow
    upcoming: list[date]
    used_by: list[Job]
    warnings: list[str]


def put_calendar(scope: Scope, name: str, dates: Sequence[str] | None, ical: str | None) -> tuple[CalendarInUse, bool]:
    """Create or replace; returns the calendar and whether it was created."""
    _check_name(name)
    row = compiled_row(name, dates, ical, scope.now)
    upcoming = _upcoming(Calendar.from_json(name, row.compiled), scope.now)  # expanded before anything is written
    with scope.db.connection() as conn, conn.transaction():
        store.lock_tenant(conn, scope.tenant_id)
        if store.get(conn, scope.tenant_id, name) is None and store.count(conn, scope.tenant_id) >= MAX_CALENDARS:
            raise ConflictError(f"a tenant has at most {MAX_CALENDARS} calendars: delete one first", field="name")
        created = store.put(conn, scope.tenant_id, row)
        audit.record(conn, scope, AuditAction.CALENDAR_PUT, target=name)
        stored = store.get(conn, scope.tenant_id, name)
        assert stored is not None
        moved = [] if created else _reaimed(scope, conn, name)
        users = [] if created else store.jobs_using(conn, scope.tenant_id, name, limit=USERS_LISTED)
    for job in moved:
        dueindex_specs.index_job(scope.index, job)
    return CalendarInUse(stored, upcoming, users, []), created


def compiled_row(name: str, dates: Sequence[str] | None, ical: str | None, now: datetime) -> CalendarRow:
    """The row a PUT stores, every date and event checked (400s naming `dates.N` or `ical`)."""
    if dates is None and ical is None:
        raise InvalidInputError("dates", "give dates, ical or both")
    explicit = _dates(dates or ())
    events: tuple[Event, ...] = ()
    if ical is not None:
        if len(ical.encode("utf-8")) > MAX_ICAL_BYTES:
            raise InvalidInputError("ical", f"at most {MAX_ICAL_BYTES} bytes (UTF-8)")
        events = parse_ical(ical)
    calendar = Calendar(name, frozenset(explicit), events)
    return CalendarRow(name, sorted(explicit), ical, calendar.to_json(), now, now)


def list_calendars(scope: Scope) -> list[CalendarRow]:
    with scope.db.connection() as conn:
        return store.list_all(conn, scope.tenant_id)


def get_calendar(scope: Scope, name: str) -> CalendarInUse:
    with scope.db.connection() as conn:
        row = store.get(conn, scope.tenant_id, name) if NAME.match(name) else None
        if row is None:
            raise NotFoundError("calendar not found")
        users = store.jobs_using(conn, scope.tenant_id, name, limit=USERS_LISTED)
    return _in_use(scope, row, users)


def _in_use(scope: Scope, row: CalendarRow, users: list[Job]) -> CalendarInUse:
    calendar = store.calendar_of(scope.tenant_id, row.name, row.compiled)
    return CalendarInUse(row, _upcoming(calendar, scope.now), users, calendar.warnings)


def _upcoming(calendar: Calendar, now: datetime) -> list[date]:
    """Its next dates from `now`'s date on, its recurring events looked for within its horizon from there."""
    return calendar.within(now.date()).upcoming(now.date(), UPCOMING, UPCOMING_YEARS)


def delete_calendar(scope: Scope, name: str) -> None:
    """Refused (409, naming up to 5 of them) while a job not deleted excludes by it."""
    with scope.db.connection() as conn, conn.transaction():
        if not (NAME.match(name) and store.lock(conn, scope.tenant_id, name)):
            raise NotFoundError("calendar not found")
        users = store.jobs_using(conn, scope.tenant_id, name, limit=_NAMED_JOBS + 1)
        if users:
            named = ", ".join(f"{job.id} ({job.name})" for job in users[:_NAMED_JOBS])
            more = " and more" if len(users) > _NAMED_JOBS else ""
            raise ConflictError(f"calendar is used by job(s) {named}{more}: change their calendar first", field="name")
        store.delete(conn, scope.tenant_id, name)
        audit.record(conn, scope, AuditAction.CALENDAR_DELETED, target=name)


# ---------------------------------------------------------------- jobs

def job_calendars(conn: Any, tenant_id: str, calendar: CalendarRef | None, *, check: bool = False,
                  field: str = "calendar") -> list[Calendar]:
    """The calendars a job's (or a preview's) `calendar` excludes by, in its order. `check`: each must exist
    (400 naming `calendar.exclude.N`), held FOR SHARE so a concurrent delete waits and then sees the job."""
    if not calendar:
        return []
    names = list(calendar.exclude)
    found = store.compiled_by_name(conn, tenant_id, names, share=check)
    for position, name in enumerate(names):
        if check and name not in found:
            raise InvalidInputError(f"{field}.exclude.{position}",
                                    "no calendar of that name: PUT /calendars/{name} first")
    return [store.calendar_of(tenant_id, name, found[name]) for name in names if name in found]


def job_schedule(job: Job, calendars: Sequence[Calendar]) -> Schedule | ExcludingSchedule:
    """A stored job's schedule with its calendars applied."""
    base = scheduling.job_schedule(job)
    if not job.calendar:
        return base
    return with_calendars(base, calendars, job.calendar.on_excluded)


def aimed(job: Job, calendars: Sequence[Calendar], now: datetime) -> Job:
    """The job with its next run as its calendars have it: the first slot after `now` that is not moved
    away (`next_day`); with `skip` the slots stay where the schedule puts them."""
    if job.status != JobStatus.ACTIVE or job.next_run_at is None or not job.calendar:
        return job
    return replace(job, next_run_at=job_schedule(job, calendars).next_after(now))


def upcoming_runs(job: Job, calendars: Sequence[Calendar], count: int) -> list[datetime]:
    """The next `count` runs of a job (none while paused or completed); with a calendar, moved ones where they
    run and skipped ones left out."""
    if job.status != JobStatus.ACTIVE or job.next_run_at is None or count < 1:
        return []
    schedule = job_schedule(job, calendars)
    if not isinstance(schedule, ExcludingSchedule):
        return [job.next_run_at, *schedule.preview(job.next_run_at, count - 1)]
    return schedule.runs(job.next_run_at - _MS, count)


def preview_slots(scope: Scope, schedule: Schedule, calendar: CalendarRef, after: datetime | None,
                  count: int) -> list[SlotDetail]:
    """A previewed schedule's next `count` slots with a job's `calendar` applied, each with what the calendars
    did to it (400 naming `calendar.exclude.N` for a calendar the tenant does not have)."""
    start = after or scope.now
    with scope.db.connection() as conn:
        found = [c.within(start.date()) for c in job_calendars(conn, scope.tenant_id, calendar, check=True)]
    excluding = ExcludingSchedule(schedule, found, calendar.on_excluded)
    return excluding.slots(start, count)


def _reaimed(scope: Scope, conn: Any, name: str) -> list[Job]:
    """After `name` changed: the active jobs that move slots by it (`next_day`) whose next run moves, and those
    in quarantine (tickwork.rules.quarantine.released), written with a new version (a poller holding the old
    slot cannot record it) and returned for the due index."""
    moved: list[Job] = []
    known: dict[str, Calendar | None] = {}
    for job in store.jobs_using(conn, scope.tenant_id, name, lock=True):
        freed = released(job, scope.now)
        moves = job.calendar is not None and job.calendar.on_excluded == OnExcluded.NEXT_DAY
        if job.status != JobStatus.ACTIVE or (freed is job and not moves):
            continue
        first = scheduling.first_slot(scheduling.job_schedule(job), scope.now)
        shared = _shared(conn, scope.tenant_id, job.calendar or CalendarRef(()), known)
        again = aimed(replace(freed, next_run_at=first), shared, scope.now)
        if again != job:
            again = replace(again, version=job.version + 1, updated_at=scope.now,
                            status=JobStatus.ACTIVE if again.next_run_at else JobStatus.COMPLETED)
            jobs_store.update_job(conn, again)
            moved.append(again)
    return moved


def _shared(
    conn: Any, tenant_id: str, calendar: CalendarRef, known: dict[str, Calendar | None],
) -> list[Calendar]:
    """job_calendars for one of many jobs: each calendar read, and each of its years expanded, once for all."""
    names = list(calendar.exclude)
    missing = [name for name in names if name not in known]
    if missing:
        read = {found.name: found for found in job_calendars(conn, tenant_id, CalendarRef(tuple(missing)))}
        known.update((name, read.get(name)) for name in missing)
    return [found for name in names if (found := known[name]) is not None]


def _check_name(name: str) -> None:
    if not NAME.match(name):
        raise InvalidInputError("name", f"must match {NAME.pattern}: letters, digits, '.', '_' and '-'")


def _dates(values: Sequence[str]) -> set[date]:
    if len(values) > MAX_DATES:
        raise InvalidInputError("dates", f"at most {MAX_DATES} dates, got {len(values)}")
    found = []
    for position, value in enumerate(values):
        try:
            if not isinstance(value, str) or not _DATE.match(value):
                raise ValueError
            found.append((position, date.fromisoformat(value)))
        except ValueError:
            raise InvalidInputError(f"dates.{position}", "must be a date as YYYY-MM-DD (a day that exists)") from None
    return set(bounded_dates(found, _refuse))


def _refuse(where: str, reason: str) -> None:
    raise InvalidInputError(where, reason)

