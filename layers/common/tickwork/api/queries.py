"""Query parameters of the filtered lists, checked like body fields: a bad value is a 400 naming it."""
from __future__ import annotations

from datetime import datetime
from typing import Annotated, Sequence

from aws_lambda_powertools.event_handler.openapi.params import Query
from pydantic import AfterValidator, StringConstraints

from tickwork.api.models import MAX_TAGS, ExecutionStatus, Instant, JobKey, JobStatus, Source, Tag, _storable
from tickwork.errors import InvalidInputError
from tickwork.store.filters import ExecutionFilter, JobFilter

# The canonical form only, so the document's pattern is exactly what the API takes.
UUID_PATTERN = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"

JobStatuses = Annotated[list[JobStatus] | None, Query(description="Only jobs in one of these states (repeatable).")]
Tags = Annotated[list[Tag] | None,
                 Query(max_length=MAX_TAGS, description="Only jobs with every one of these tags (repeatable).")]
NamePrefix = Annotated[
    Annotated[str, StringConstraints(min_length=1, max_length=200), AfterValidator(_storable)] | None,
    Query(description="Only jobs whose name starts with this (case-sensitive)."),
]
KeyFilter = Annotated[JobKey | None, Query(description="Only the job with this key.")]
SourceFilter = Annotated[Source | None, Query(description="Only jobs managed by this source label.")]
ExecutionStatuses = Annotated[
    list[ExecutionStatus] | None, Query(description="Only executions in one of these states (repeatable).")
]
JobId = Annotated[
    Annotated[str, StringConstraints(pattern=UUID_PATTERN)] | None,
    Query(description="Only this job's executions; an id of no job of yours matches none."),
]
Since = Annotated[Instant | None, Query(description="Only slots at or after this time.")]
Until = Annotated[Instant | None, Query(description="Only slots before this time.")]


def job_filter(status: Sequence[str] | None, tag: Sequence[str] | None, name_prefix: str | None,
               key: str | None = None, source: str | None = None) -> JobFilter:
    return JobFilter(tuple(dict.fromkeys(status or ())), tuple(dict.fromkeys(tag or ())), name_prefix, key, source)


def check_window(since: datetime | None, until: datetime | None) -> None:
    """400 naming `until` unless it is later than `since` (either may be absent)."""
    if since is not None and until is not None and until <= since:
        raise InvalidInputError("until", "must be later than since")


def execution_filter(
    status: Sequence[str] | None, job_id: str | None, since: datetime | None, until: datetime | None
) -> ExecutionFilter:
    check_window(since, until)
    return ExecutionFilter(tuple(dict.fromkeys(status or ())), job_id.lower() if job_id else None, since, until)
