"""Calendars: named sets of dates (explicit, or all-day events of an iCalendar file) that jobs do not run on."""
from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from pydantic import AfterValidator, BaseModel, Field, StringConstraints

from tickwork.api.models import Timestamp, _storable, _Strict
from tickwork.api.routes import JobsReader, JobsWriter, needs, openapi_responses
from tickwork.store.calendars import CalendarRow
from tickwork.tenant import calendars
from tickwork.tenant.access import JOBS_READ, JOBS_WRITE
from tickwork.timeutil import rfc3339

router = Router()

DateText = Annotated[str, StringConstraints(max_length=10), Field(examples=["2026-12-25"])]


class CalendarPut(_Strict):
    """At least one of `dates` and `ical`; a PUT replaces the whole calendar."""

    dates: list[DateText] | None = Field(None, max_length=calendars.MAX_DATES, description=(
        f"Dates excluded, YYYY-MM-DD, at most {calendars.MAX_DATES}."))
    ical: Annotated[str, AfterValidator(_storable)] | None = Field(
        None, max_length=calendars.MAX_ICAL_BYTES, description=(
        "An iCalendar file (RFC 5545) of all-day VEVENTs (DTSTART;VALUE=DATE), which may span several days "
        "(DTEND, DURATION) and recur (RRULE by day, week, month or year; RDATE; EXDATE); at most 256 KiB."),
        examples=["BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//example//holidays//EN\r\nBEGIN:VEVENT\r\n"
                 "UID:christmas\r\nDTSTART;VALUE=DATE:20201225\r\nRRULE:FREQ=YEARLY\r\nSUMMARY:Christmas\r\n"
                 "END:VEVENT\r\nEND:VCALENDAR\r\n"])


class CalendarSummary(BaseModel):
    name: str
    dates: int = Field(description="How many explicit dates it has.")
    events: int = Field(description="How many all-day events its iCalendar text has.")
    created_at: Timestamp
    updated_at: Timestamp


class CalendarUser(BaseModel):
    id: str
    name: str


class CalendarDetail(BaseModel):
    name: str
    dates: list[str]
    ical: str | None
    events: int
    upcoming: list[str] = Field(description=(
        f"The next {calendars.UPCOMING} dates it excludes from today (UTC) on, YYYY-MM-DD: its explicit dates and "
        f"its events' (these looked for up to {calendars.UPCOMING_YEARS} years ahead)."))
    used_by: list[CalendarUser] = Field(description=(
        f"Jobs (not deleted) that exclude by it, oldest first, at most {calendars.USERS_LISTED}."))
    warnings: list[str] = Field(description=(
        "What of a calendar stored by an earlier release is outside today's bounds and so left out (excludes "
        "nothing), each with where and why (`event 3: DTSTART outside 1970-01-01..2200-12-31; left out`). "
        "Empty for every calendar written since: a PUT refuses what is out of bounds."))
    created_at: Timestamp
    updated_at: Timestamp


class CalendarList(BaseModel):
    items: list[CalendarSummary] = Field(description="Every calendar of the tenant (at most 100), by name.")


@router.put("/calendars/<name>", summary="Create (201) or replace (200) a calendar", tags=["calendars"],
            security=needs(JOBS_WRITE), responses={**openapi_responses(200, 400, 409),
                       201: {"description": "Created", "content": {"application/json": {"model": CalendarDetail}}}})
def put_calendar(name: str, calendar: CalendarPut, scope: JobsWriter) -> Response[CalendarDetail]:
    stored, created = calendars.put_calendar(scope, name, calendar.dates, calendar.ical)
    return Response(status_code=201 if created else 200, content_type=content_types.APPLICATION_JSON,
                    body=_detail(stored).model_dump())  # type: ignore[arg-type]  # Response[Model] names the model for the OpenAPI document; the body is it dumped


@router.get("/calendars", summary="List calendars, by name", tags=["calendars"],
            security=needs(JOBS_READ), responses=openapi_responses(200))
def list_calendars(scope: JobsReader) -> CalendarList:
    return CalendarList(items=[_summary(row) for row in calendars.list_calendars(scope)])


@router.get("/calendars/<name>", summary="A calendar with its dates and iCalendar text", tags=["calendars"],
            security=needs(JOBS_READ), responses=openapi_responses(200, 404))
def get_calendar(name: str, scope: JobsReader) -> CalendarDetail:
    return _detail(calendars.get_calendar(scope, name))


@router.delete("/calendars/<name>", status_code=204, summary="Delete a calendar no job uses", tags=["calendars"],
               security=needs(JOBS_WRITE), responses=openapi_responses(204, 404, 409))
def delete_calendar(name: str, scope: JobsWriter) -> Response[None]:
    calendars.delete_calendar(scope, name)
    return Response(status_code=204)


def _summary(row: CalendarRow) -> CalendarSummary:
    return CalendarSummary(name=row.name, dates=len(row.dates), events=len(row.compiled.get("events", ())),
                           created_at=rfc3339(row.created_at) or "", updated_at=rfc3339(row.updated_at) or "")


def _detail(calendar: calendars.CalendarInUse) -> CalendarDetail:
    row = calendar.row
    return CalendarDetail(name=row.name, dates=[d.isoformat() for d in row.dates], ical=row.ical,
                          events=len(row.compiled.get("events", ())),
                          upcoming=[d.isoformat() for d in calendar.upcoming],
                          used_by=[CalendarUser(id=str(job.id), name=job.name) for job in calendar.used_by],
                          warnings=calendar.warnings,
                          created_at=rfc3339(row.created_at) or "", updated_at=rfc3339(row.updated_at) or "")
