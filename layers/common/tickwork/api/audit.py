"""GET /audit: the tenant's audit log, newest first (tickwork.tenant.audit).

It needs jobs:read, so that the console's job page shows any reader when its job changed and which fields. Who
made a change (the key's id and name), from where and the values before and after need audit:read too: they
tell a reader what its scopes do not (the tenant's keys, their scopes, a deleted job's body). Without it each
entry comes without them and the list says `redacted`.
"""
from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, cast

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query
from pydantic import BaseModel, Field, StringConstraints

from tickwork import vocab
from tickwork.api.models import Instant, Timestamp
from tickwork.api.pagination import DEFAULT_LIMIT, decode_cursor, encode_cursor, fitted
from tickwork.api.queries import UUID_PATTERN, check_window
from tickwork.api.routes import Cursor, JobsReader, Limit, needs, openapi_responses
from tickwork.api.vocabulary import OneOf
from tickwork.models import Page
from tickwork.store.audit import AuditRow
from tickwork.store.filters import AuditFilter
from tickwork.tenant import audit
from tickwork.tenant.access import JOBS_READ
from tickwork.timeutil import rfc3339

router = Router()

AuditAction = Annotated[vocab.AuditAction, OneOf()]
CURSOR_KIND = "audit"


class AuditChange(BaseModel):
    field: str = Field(description="The field's dotted path (`request.url`, `request.headers.X-Team`, `status`).")
    before: Any = Field(description="Its value before; null for what did not exist. Sensitive header values: ***.")
    after: Any = Field(description="Its value after; null for what was removed.")
    digested: list[Literal["before", "after"]] = Field(
        default_factory=list,
        description="The sides kept as `{\"size\": n, \"sha256\": \"...\"}` instead of the value: one over 512 "
                    "bytes of JSON (a string's size and SHA-256 are of its UTF-8 text, another value's of its "
                    "compact JSON with sorted keys).")


class AuditEntry(BaseModel):
    id: str
    at: Timestamp
    action: AuditAction
    job_id: str | None = Field(description="The job changed, for job.* entries.")
    target: str | None = Field(description="What was acted on, by action: the job's name (job.*, but job.run and "
                                           "job.replayed), the execution id (job.run, job.replayed of one run), the "
                                           "window `since/until` (job.replayed of a job's window), the secret's "
                                           "name (secret.*), the API key's id (api_key.*), the calendar's name.")
    key_id: str | None = Field(description="The API key that made the change; null for a service (CloudFormation).")
    key_name: str | None = Field(description="That key's name when it made the change, or the service "
                                             "(`cloudformation:<stack>`).")
    request_id: str | None = Field(description="API Gateway's request id (CloudFormation's for a stack).")
    client_ip: str | None = Field(description="The client's address as API Gateway saw it.")
    changes: list[AuditChange] | None = Field(
        description="The fields changed, before and after (job.created, job.updated, job.paused, job.resumed, "
                    "api_key.created); null for the other actions.")
    changes_omitted: int = Field(0, description="Changes left out to keep the entry within 16 KiB (the last ones).")


class AuditList(BaseModel):
    items: list[AuditEntry]
    next_cursor: str | None
    redacted: bool = Field(description=(
        "True when the API key lacks audit:read: each entry's key_id, key_name and client_ip are null, and its "
        "changes name the fields only (before and after null)."))


Action = Annotated[AuditAction | None, Query(description="Only entries of this action.")]
AuditJobId = Annotated[
    Annotated[str, StringConstraints(pattern=UUID_PATTERN)] | None,
    Query(description="Only this job's entries; an id of no job of yours matches none."),
]
Since = Annotated[Instant | None, Query(description="Only entries made at or after this time.")]
Until = Annotated[Instant | None, Query(description="Only entries made before this time.")]


@router.get("/audit", summary="Who changed what, newest first (who and the values with audit:read)", tags=["audit"],
            security=needs(JOBS_READ), responses=openapi_responses(200, 400))
def list_audit(scope: JobsReader, limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None, action: Action = None,
               job_id: AuditJobId = None, since: Since = None, until: Until = None) -> AuditList:
    page = audit.list_events(scope, audit_filter(job_id, action, since, until), limit,
                             decode_cursor(CURSOR_KIND, cursor))
    return audit_list(page, redacted=not audit.reads_in_full(scope))


def audit_filter(job_id: str | None, action: str | None, since: datetime | None, until: datetime | None) -> AuditFilter:
    check_window(since, until)
    return AuditFilter(job_id.lower() if job_id else None, action, since, until)


def audit_list(page: Page[AuditRow], redacted: bool) -> AuditList:
    items, next_key = fitted(page, _entry)
    return AuditList(items=items, next_cursor=encode_cursor(CURSOR_KIND, next_key), redacted=redacted)


def _entry(row: AuditRow) -> AuditEntry:
    return AuditEntry(id=row.id, at=rfc3339(row.at) or "", action=cast(AuditAction, row.action), job_id=row.job_id,
                      target=row.target, key_id=row.key_id, key_name=row.key_name, request_id=row.request_id,
                      client_ip=row.client_ip,
                      changes=None if row.changes is None else [AuditChange(**c) for c in row.changes],
                      changes_omitted=row.changes_omitted or 0)
