"""The API's response bodies (tickwork.api.models has the requests and the types both share). The OpenAPI
document is generated from these models too."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from tickwork.api.models import Catchup, JobStatus, Overlap, RequestAuthSpec, TargetSpec, Timestamp, Trigger
from tickwork.http.delivery import DEFAULT_TIMEOUT_SECONDS
from tickwork.rules.replay import MAX_REPLAYS_PER_RUN
from tickwork.rules.retry import (
    DEFAULT_DELAY_SECONDS,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_STRATEGY,
    MAX_DELAY_SECONDS,
    STORED_JITTER,
    STORED_PAST_NEXT_RUN,
)


def _absent(value: Any) -> bool:
    return value is None


class RequestOut(BaseModel):
    method: str = "GET"
    url: str
    headers: dict[str, str] = Field(default_factory=dict, description='Sensitive values are shown as "***".')
    body: str | None = None
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS
    auth: RequestAuthSpec | None = Field(None, exclude_if=_absent, description=(
        "Present when the request is signed with AWS SigV4."))


class RetryOut(BaseModel):
    strategy: str = DEFAULT_STRATEGY
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    delay_seconds: int | float = DEFAULT_DELAY_SECONDS
    # A job stored before these fields existed keeps its old timing, and shows it.
    jitter: str = STORED_JITTER
    max_delay_seconds: int | float = MAX_DELAY_SECONDS
    past_next_run: bool = STORED_PAST_NEXT_RUN


class NotifyOut(BaseModel):
    url: str
    on: list[str]


class SuccessOut(BaseModel):
    status_codes: list[int | str]
    body_contains: str | None = None


class CompletionOut(BaseModel):
    mode: Literal["response", "callback"]
    timeout_seconds: int | None = Field(description="callback only: how long a run awaits its callback.")


class CalendarOut(BaseModel):
    exclude: list[str]
    on_excluded: str


class JobOut(BaseModel):
    id: str
    name: str
    status: JobStatus
    schedule: str = Field(description="The canonical form of the schedule.")
    timezone: str
    start_at: Timestamp | None
    end_at: Timestamp | None
    request: RequestOut | None = Field(description="The HTTP request it sends; null for a job with a target.")
    target: TargetSpec | None = Field(None, description="The AWS target it calls; null for a job with a request.")
    retry: RetryOut
    next_run_at: Timestamp | None
    version: int
    overlap: Overlap
    catchup: Catchup
    catchup_window_seconds: int
    spread_seconds: int = Field(description="Runs are moved later by the job's offset in [0, spread_seconds].")
    tags: list[str]
    description: str
    notify: NotifyOut | None = None
    pause_after_failures: int | None = None
    paused_reason: str | None = Field(None, description="Why the job was paused automatically; null otherwise.")
    success: SuccessOut | None = None
    key: str | None = Field(None, description="Its stable name (PUT /jobs/by-key/{key}); null when it has none.")
    source: str | None = Field(None, description="What manages it (a jobs file's label, a stack); null when unset.")
    completion: CompletionOut = Field(description="How its runs end: by the answer, or by a callback.")
    calendar: CalendarOut | None = Field(None, description="The calendars it does not run on; null when none.")
    max_runs: int | None = Field(None, description="Scheduled runs it sends before it ends; null: no bound.")
    end_action: str = Field("none", description="What becomes of it once its last run ended: none or delete.")
    runs_sent: int = Field(0, description="Scheduled runs sent so far (what max_runs counts).")
    error_reason: str | None = Field(None, description=(
        "Status errored: why the scheduler set it aside (the step and the error's type); null otherwise. It is "
        "tried again after a backoff; any change to it, or to a calendar it names, releases it at once."))
    errored_at: Timestamp | None = Field(None, description="Status errored: since when; null otherwise.")
    created_at: Timestamp
    updated_at: Timestamp


class JobDetail(JobOut):
    schedule_description: str = Field(description="The schedule in words.")
    next_fire_times: list[Timestamp] = Field(description="The next 5 runs; empty unless the job is active.")


class JobList(BaseModel):
    items: list[JobOut]
    next_cursor: str | None


class ExecutionOut(BaseModel):
    id: str
    job_id: str
    scheduled_for: Timestamp
    trigger: Trigger
    status: str
    attempt_count: int
    next_attempt_at: Timestamp | None
    created_at: Timestamp
    started_at: Timestamp | None
    finished_at: Timestamp | None
    last_error: str | None
    missed_count: int | None = Field(None, description="For a missed run: how many slots it stands for.")
    replay_count: int = Field(0, description="How many times the run was replayed (POST /executions/{id}/replay).")
    replayed_at: Timestamp | None = Field(None, description="When it was last replayed; null if never.")
    completion_deadline: Timestamp | None = Field(None, description=(
        "While awaiting_completion: when the attempt fails unless its callback is called."))


class AttemptOut(BaseModel):
    number: int
    started_at: Timestamp
    duration_ms: int
    status_code: int | None
    error: str | None
    response_body: str | None = Field(description="The first 1024 characters of the stored response body.")
    response_truncated: bool
    output: str | None = Field(None, description="What the completion callback reported (callback mode).")


class ExecutionDetail(ExecutionOut):
    attempts: list[AttemptOut]


class ExecutionList(BaseModel):
    items: list[ExecutionOut]
    next_cursor: str | None


class ReplayOut(BaseModel):
    count: int = Field(description="The runs replayed (with dry_run: that would be).")
    execution_ids: list[str] = Field(description="Their ids in slot order: the first 1,000 of them.")
    execution_ids_truncated: bool = Field(description="More runs were replayed than execution_ids lists.")
    first_at: Timestamp | None = Field(description="When the first of them is sent; null when there are none.")
    last_at: Timestamp | None = Field(description="When the last one is sent (the tenant's replay pace).")
    dry_run: bool
    at_replay_limit: int = Field(0, description=(
        f"Runs of the window left as they are: each was replayed {MAX_REPLAYS_PER_RUN} times already, the most one "
        "run may be."))


class FireTime(BaseModel):
    utc: Timestamp
    local: str = Field(description="The same instant in the schedule's time zone, with its UTC offset.")
    # Only present where a calendar put them: a preview without one has the shape it always had.
    excluded_by: str | None = Field(None, exclude_if=_absent, description=(
        "With a calendar: the calendar that excludes this slot's date; it is recorded skipped, not run."))
    moved_from: Timestamp | None = Field(None, exclude_if=_absent, description=(
        "With a calendar and on_excluded next_day: the slot on an excluded date that runs here instead."))


class PreviewOut(BaseModel):
    schedule: str
    timezone: str
    description: str
    fire_times: list[FireTime]
    hash_key: str = Field(description="The job id H and the spread offset were derived from: job_id, else the default.")
    offset_seconds: int = Field(description="The spread offset added to every fire time, in seconds.")


class NotificationOut(BaseModel):
    id: str = Field(description="The event's id: the same on every attempt (webhook-id), for receivers to dedupe.")
    type: Literal["run.failed", "job.recovered", "job.paused"]
    execution_id: str
    status: Literal["pending", "sending", "delivered", "failed"]
    attempts: int
    next_attempt_at: Timestamp | None
    last_status_code: int | None
    last_error: str | None
    created_at: Timestamp
    finished_at: Timestamp | None
    event: dict[str, Any] = Field(description="The JSON body sent.")


class NotificationList(BaseModel):
    items: list[NotificationOut] = Field(description="The job's last 100 notifications, newest first.")


class ErrorDetail(BaseModel):
    code: str
    message: str
    field: str | None


class ErrorBody(BaseModel):
    error: ErrorDetail


class RunCounts(BaseModel):
    queued: int
    waiting: int
    running: int
    retrying: int
    awaiting_completion: int
    succeeded: int
    failed: int
    skipped: int
    missed: int
    lost: int


class FireLag(BaseModel):
    samples: int = Field(description="First attempts of scheduled runs in the window.")
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None


class StatsOut(BaseModel):
    window_seconds: int
    since: Timestamp
    until: Timestamp
    runs: RunCounts = Field(description="Executions whose slot is in [since, until), by status.")
    fire_lag: FireLag = Field(description="How late first attempts were sent after their slot.")
    truncated: bool = Field(description="The window held more runs than one request counts (100,000): these "
                                        "figures are of its newest ones, and since is later than window_seconds ago.")


class HealthOut(BaseModel):
    status: Literal["ok", "degraded"]
    postgres: Literal["ok", "error", "timeout"]
    redis: Literal["ok", "error", "timeout"]
    last_tick_age_seconds: float | None = Field(description="Since the poller last ticked; null if unknown.")
    version: str = Field(description="The release answering (CHANGELOG.md), e.g. during an upgrade.",
                         examples=["0.30.0"])


# ---------------------------------------------------------------- API keys

_SCOPES = Field(description="What the key may do (docs/api.md, \"Scopes\").", examples=[["jobs:read"]])


class ApiKeyOut(BaseModel):
    id: str
    name: str
    prefix: str = Field(description="The key's first 8 characters, to tell keys apart.")
    scopes: list[str] = _SCOPES
    created_at: Timestamp
    last_used_at: Timestamp | None = Field(description="When the key was last used, to the minute.")


class ApiKeyCreated(BaseModel):
    id: str
    name: str
    prefix: str
    key: str = Field(description="The key itself: shown only in this response, keep it (Authorization: Bearer).")
    scopes: list[str] = _SCOPES
    created_at: Timestamp


class CurrentKeyOut(BaseModel):
    id: str
    name: str
    prefix: str
    tenant_id: str
    scopes: list[str] = _SCOPES


class ApiKeyList(BaseModel):
    items: list[ApiKeyOut]
