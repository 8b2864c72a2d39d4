"""The routes: each parses its input, calls one function of `tickwork.tenant.jobs` and shapes the answer.

Every route takes `scope` from `current_scope` (authentication, the tenant, the request's single `now`),
through `requires` for the scope it needs (tickwork.tenant.access), which it also declares in the OpenAPI
document with `security=needs(...)` (tests/integration/api/test_api_scopes.py holds each route to it).
"""
from __future__ import annotations

from datetime import datetime
from typing import Annotated, Sequence

from aws_lambda_powertools.event_handler import Depends, Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse, OpenAPIResponseHeader

from tickwork.api import views
from tickwork.api.auth import current_scope, requires
from tickwork.api.idempotent import IdempotencyKey, respond
from tickwork.api.models import JobCreate, JobPatch, PreviewRequest
from tickwork.api.pagination import DEFAULT_LIMIT, MAX_LIMIT, decode_cursor
from tickwork.api.queries import JobStatuses, KeyFilter, NamePrefix, SourceFilter, job_filter
from tickwork.api.queries import Tags as TagFilter
from tickwork.api.responses import (
    ErrorBody,
    ExecutionDetail,
    ExecutionList,
    ExecutionOut,
    JobDetail,
    JobList,
    PreviewOut,
)
from tickwork.schedule import hashing
from tickwork.schedule.excluded import SlotDetail
from tickwork.scope import Scope
from tickwork.tenant import calendars, history, jobs
from tickwork.tenant.access import JOBS_READ, JOBS_WRITE, KEYS_ADMIN, RUNS_WRITE, SECRETS_WRITE
from tickwork.models import CalendarRef, JobDraft

router = Router()


Caller = Annotated[Scope, Depends(current_scope)]  # any live key of the tenant: no scope needed
JobsReader = Annotated[Scope, Depends(requires(JOBS_READ))]
JobsWriter = Annotated[Scope, Depends(requires(JOBS_WRITE))]
RunsWriter = Annotated[Scope, Depends(requires(RUNS_WRITE))]
SecretsWriter = Annotated[Scope, Depends(requires(SECRETS_WRITE))]
KeysAdmin = Annotated[Scope, Depends(requires(KEYS_ADMIN))]
Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description="Page size.")]
Cursor = Annotated[str | None, Query(description="next_cursor of the previous page.")]


def needs(scope_name: str) -> list[dict[str, list[str]]]:
    """A route's security requirement: an API key holding `scope_name` (OpenAPI 3.1 lets a bearer scheme
    name the roles it needs)."""
    return [{"apiKey": [scope_name]}]


def openapi_responses(success: int, *errors: int, scoped: bool = True) -> dict[int, OpenAPIResponse]:
    """The success response (its schema from the return annotation) and the errors a route can answer;
    `scoped`: the route needs a scope, so a key without it is answered 403."""
    descriptions = {200: "OK", 201: "Created", 202: "Accepted", 204: "No Content", 400: "Invalid input",
                    401: "Missing or invalid API key",
                    403: "The API key lacks the scope this operation needs (missing_scope, the message names it), "
                         "or the call would take the tenant over one of its quotas (quota_exceeded)",
                    404: "Unknown id",
                    409: "Not possible in the current state", 422: "Idempotency-Key reused for another request",
                    429: "Rate limited: retry after Retry-After seconds",
                    503: "A query ran past the API's statement timeout and was cancelled: ask for less, or retry"}
    responses: dict[int, OpenAPIResponse] = {success: {"description": descriptions[success]}}
    if success == 204:
        responses[success]["content"] = {}
    for status in (401, *((403,) if scoped else ()), 429, 503, *errors):
        responses[status] = {"description": descriptions[status], "content": {"application/json": {"model": ErrorBody}}}
    responses[429]["headers"] = {**_RATE_LIMIT_HEADERS, "Retry-After": {
        "description": "Seconds until a request will be let through.", "schema": {"type": "integer"},
        "required": True}}  # type: ignore[typeddict-unknown-key]
    responses[success]["headers"] = dict(_RATE_LIMIT_HEADERS)
    return responses


_RATE_LIMIT_HEADERS: dict[str, OpenAPIResponseHeader] = {
    "RateLimit-Limit": {"description": "The bucket's size (its burst): the API key's, or its tenant's when that one"
                                       " decided.", "schema": {"type": "integer"}},
    "RateLimit-Remaining": {"description": "Requests left in the bucket.", "schema": {"type": "integer"}},
    "RateLimit-Reset": {"description": "Seconds until the bucket is full again.", "schema": {"type": "integer"}},
}


@router.post("/jobs", status_code=201, summary="Create a job", tags=["jobs"],
             security=needs(JOBS_WRITE), responses=openapi_responses(201, 400, 403, 409, 422))
def create_job(job: JobCreate, scope: JobsWriter, idempotency_key: IdempotencyKey = None) -> Response[JobDetail]:
    return respond(scope, idempotency_key, 201,
                   lambda: views.job_detail(jobs.create_job(scope, JobDraft.from_dict(job.model_dump()))),
                   lambda job_id: views.job_detail(jobs.get_job(scope, job_id)))


@router.get("/jobs", summary="List jobs, newest first", tags=["jobs"], security=needs(JOBS_READ),
            responses=openapi_responses(200, 400))
def list_jobs(scope: JobsReader, limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None, status: JobStatuses = None,
              tag: TagFilter = None, name_prefix: NamePrefix = None, key: KeyFilter = None,
              source: SourceFilter = None) -> JobList:
    filters = job_filter(status, tag, name_prefix, key, source)
    return views.job_list(jobs.list_jobs(scope, limit, decode_cursor("jobs", cursor), filters))


@router.get("/jobs/<job_id>", summary="Get a job and its next 5 runs", tags=["jobs"], security=needs(JOBS_READ),
            responses=openapi_responses(200, 404))
def get_job(job_id: str, scope: JobsReader) -> JobDetail:
    return views.job_detail(jobs.get_job(scope, job_id))


@router.patch("/jobs/<job_id>", summary="Change some fields of a job", tags=["jobs"],
              security=needs(JOBS_WRITE), responses=openapi_responses(200, 400, 403, 404))
def update_job(job_id: str, changes: JobPatch, scope: JobsWriter) -> JobDetail:
    return views.job_detail(jobs.update_job(scope, job_id, changes.model_dump(exclude_unset=True)))


@router.delete("/jobs/<job_id>", status_code=204, summary="Delete a job (its history is kept)", tags=["jobs"],
               security=needs(JOBS_WRITE), responses=openapi_responses(204, 404))
def delete_job(job_id: str, scope: JobsWriter) -> Response[None]:
    jobs.delete_job(scope, job_id)
    return Response(status_code=204)


@router.post("/jobs/<job_id>/pause", summary="Stop running a job", tags=["jobs"], security=needs(JOBS_WRITE),
             responses=openapi_responses(200, 404, 409))
def pause_job(job_id: str, scope: JobsWriter) -> JobDetail:
    return views.job_detail(jobs.pause_job(scope, job_id))


@router.post("/jobs/<job_id>/resume", summary="Run a paused job again from its next slot", tags=["jobs"],
             security=needs(JOBS_WRITE), responses=openapi_responses(200, 403, 404, 409))
def resume_job(job_id: str, scope: JobsWriter) -> JobDetail:
    return views.job_detail(jobs.resume_job(scope, job_id))


@router.post("/jobs/<job_id>/run", status_code=202, summary="Run a job once, now", tags=["jobs"],
             security=needs(RUNS_WRITE), responses=openapi_responses(202, 400, 404, 409, 422))
def run_job(job_id: str, scope: RunsWriter, idempotency_key: IdempotencyKey = None) -> Response[ExecutionOut]:
    return respond(scope, idempotency_key, 202, lambda: views.execution_out(jobs.run_job(scope, job_id)))


@router.get("/jobs/<job_id>/executions", summary="A job's executions, newest first", tags=["executions"],
            security=needs(JOBS_READ), responses=openapi_responses(200, 400, 404))
def list_executions(
    job_id: str, scope: JobsReader, limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None,
) -> ExecutionList:
    page = history.list_executions(scope, job_id, limit, decode_cursor("executions", cursor))
    return views.execution_list(page)


@router.get("/executions/<execution_id>", summary="An execution with its attempts", tags=["executions"],
            security=needs(JOBS_READ), responses=openapi_responses(200, 404))
def get_execution(execution_id: str, scope: JobsReader) -> ExecutionDetail:
    return views.execution_detail(history.get_execution(scope, execution_id))


@router.post("/schedules/preview", summary="Check a schedule and list its next fire times", tags=["schedules"],
             security=needs(JOBS_READ), responses=openapi_responses(200, 400))
def preview_schedule(preview: PreviewRequest, scope: JobsReader) -> PreviewOut:
    hash_key = str(preview.job_id or hashing.PREVIEW_KEY)
    schedule, times = jobs.preview_schedule(
        scope, preview.schedule, preview.timezone, preview.count, preview.after, preview.start_at, preview.end_at,
        (hash_key, preview.spread_seconds),
    )
    shown: Sequence[datetime | SlotDetail] = times
    if preview.calendar is not None:
        shown = calendars.preview_slots(scope, schedule, CalendarRef.from_dict(preview.calendar.model_dump()),
                                        preview.after, preview.count)
    return views.preview_out(schedule, shown, hash_key)
