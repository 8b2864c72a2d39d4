"""The API's request and response bodies. The OpenAPI document is generated from these models.

Request models forbid unknown fields, so a typo ("schedual") is a 400 naming it, not a silent default.
"""
from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar, cast
from uuid import UUID

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StringConstraints,
)

from tickwork import vocab
from tickwork.api.vocabulary import OneOf
from tickwork.http.delivery import DEFAULT_TIMEOUT_SECONDS
from tickwork.http.targets import MAX_URL_LENGTH
from tickwork.rules import replay, success
from tickwork.rules import completion as completion_rules
from tickwork.rules.notifications import ON_CHOICES
from tickwork.rules.policy import DEFAULT_CATCHUP, DEFAULT_CATCHUP_WINDOW_SECONDS, DEFAULT_OVERLAP
from tickwork.rules.retry import (
    DEFAULT_DELAY_SECONDS,
    DEFAULT_JITTER,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_DELAY_SECONDS,
    DEFAULT_PAST_NEXT_RUN,
    DEFAULT_STRATEGY,
    MAX_DELAY_SECONDS,
)
from tickwork.schedule.excluded import DEFAULT_ON_EXCLUDED
from tickwork.schedule.hashing import MAX_SPREAD_SECONDS
from tickwork.tenant import access, bykey
from tickwork.tenant.calendars import MAX_EXCLUDE
from tickwork.tenant.calendars import NAME as CALENDAR_NAME
from tickwork.timeutil import EARLIEST, LATEST, floor_to_ms, rfc3339, supported

# Past this many attempts a failing target needs fixing, not retrying.
MAX_ATTEMPTS = 10
# A job is a trigger, not a file upload; the body lives in a Postgres row read on every run.
MAX_BODY_CHARS = 64 * 1024
MAX_HEADERS = 50
MAX_PREVIEW_COUNT = 100
# A week: past that a catch-up run is history, not scheduling.
MAX_CATCHUP_WINDOW_SECONDS = 7 * 86_400
DEFAULT_PREVIEW_COUNT = 5
MAX_TAGS = 20
MAX_DESCRIPTION_CHARS = 1000
# Letters, digits and _ - . : / =, starting with a letter or digit: `env:prod`, `team=payments`, `eu-west-1`.
# No comma (API Gateway joins a repeated query parameter with commas), no space, no wildcard.
TAG_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:/=-]{0,63}$"
# Pausing after more failed runs than this is no pause at all.
MAX_PAUSE_AFTER_FAILURES = 1000
KEY_PATTERN = bykey.KEY.pattern
# What manages a job: a jobs file's label, `cfn:<stack>`.
SOURCE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/@=+-]{0,127}$"
CALENDAR_NAME_PATTERN = CALENDAR_NAME.pattern
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})$", re.ASCII)


def _not_null(value: Any) -> Any:
    # Runs only for values the client sent: an absent field keeps its None default and means "unchanged".
    if value is None:
        raise ValueError("must not be null")
    return value


def _drop_null(schema: dict[str, Any]) -> None:
    # null is refused by _not_null, so the document should not offer it.
    options = [option for option in schema.get("anyOf", []) if option.get("type") != "null"]
    if len(options) == 1:
        del schema["anyOf"]
        schema.update(options[0])
    schema.pop("default", None)


def _upper(value: Any) -> Any:
    return value.upper() if isinstance(value, str) else value


def _single_line(value: str) -> str:
    if any(c in value for c in "\r\n\x00"):
        raise ValueError("header values cannot contain line breaks or NUL")
    return value


def _storable(value: str) -> str:
    if "\x00" in value:  # Postgres text cannot hold NUL
        raise ValueError("must not contain NUL characters")
    return value


def _rfc3339_text(value: Any) -> Any:
    # pydantic alone also reads numbers as Unix times and other ISO 8601 forms as dates; the document
    # promises the RFC 3339 date-time format, and a number of seconds is too easily a number of ms.
    if not isinstance(value, str) or not _RFC3339.match(value):
        raise ValueError("must be an RFC 3339 date-time with an offset, e.g. 2026-03-12T19:04:00Z")
    return value


def _instant(value: datetime) -> datetime:
    if not supported(value):
        raise ValueError(f"must be from {rfc3339(EARLIEST)} up to, not including, {rfc3339(LATEST)}")
    return floor_to_ms(value)


def _distinct(values: list[str]) -> list[str]:
    # A tag set: a repeated tag is the same tag, kept once where it first appears.
    return list(dict.fromkeys(values))


T = TypeVar("T")
# A PATCH field: absent means unchanged, null is refused.
Unchanged = Annotated[T | None, BeforeValidator(_not_null), Field(json_schema_extra=_drop_null)]
Timestamp = Annotated[str, Field(json_schema_extra={"format": "date-time"})]
Name = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200), AfterValidator(_storable)
]
ScheduleText = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=256),
                         Field(examples=["0 30 2 * * *", "rate(5 minutes)", "every weekday at 17:00"])]
TimeZoneName = Annotated[str, StringConstraints(min_length=1, max_length=64), Field(examples=["Europe/Paris"])]
HttpMethod = Annotated[Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"], BeforeValidator(_upper)]
# RFC 9110 token characters.
HeaderName = Annotated[str, StringConstraints(min_length=1, max_length=256, pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")]
HeaderValue = Annotated[str, StringConstraints(max_length=8192), AfterValidator(_single_line)]
Headers = Annotated[dict[HeaderName, HeaderValue], Field(max_length=MAX_HEADERS)]
Url = Annotated[str, StringConstraints(min_length=1, max_length=MAX_URL_LENGTH),
                Field(examples=["https://example.com/hooks/report"])]
RequestBody = Annotated[str, StringConstraints(max_length=MAX_BODY_CHARS), AfterValidator(_storable)]
# A request time: shown back to the millisecond, so it is kept to the millisecond.
Instant = Annotated[AwareDatetime, BeforeValidator(_rfc3339_text), AfterValidator(_instant)]
Tag = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=TAG_PATTERN),
               Field(examples=["env:prod"])]
Tags = Annotated[list[Tag], Field(max_length=MAX_TAGS), AfterValidator(_distinct)]
Description = Annotated[str, StringConstraints(max_length=MAX_DESCRIPTION_CHARS), AfterValidator(_storable)]
JobKey = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=KEY_PATTERN),
                  Field(examples=["nightly-report"])]
Source = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=SOURCE_PATTERN),
                   Field(examples=["reports-repo"])]
ExecutionStatus = Annotated[vocab.RunStatus, OneOf()]
Timeout = Annotated[int, Field(ge=1, description="Seconds; at most the deployment's cap (120 by default).")]
Strategy = Literal["exponential", "linear", "fixed"]
# `errored`: active, but in quarantine (tickwork.dispatch.quarantine): `error_reason` says why.
JobStatus = Annotated[vocab.JobStatus, OneOf(vocab.JobStatus.ACTIVE, vocab.JobStatus.PAUSED, vocab.JobStatus.COMPLETED,
                                               vocab.JobStatus.ERRORED)]
Trigger = Annotated[vocab.Trigger, OneOf()]
MaxAttempts = Annotated[int, Field(ge=1, le=MAX_ATTEMPTS, description="Attempts in all, the first one included.")]
DelaySeconds = Annotated[int, Field(ge=1, le=MAX_DELAY_SECONDS)]
Overlap = Annotated[vocab.Overlap, OneOf()]
Catchup = Annotated[vocab.Catchup, OneOf()]
Jitter = Annotated[vocab.Jitter, OneOf()]
NotifyOn = Literal["failure", "recovery", "paused"]
MaxDelay = Annotated[int, Field(ge=1, le=MAX_DELAY_SECONDS, description="No wait between attempts is longer.")]
MaxRuns = Annotated[int, Field(ge=1, strict=True, description=(
    "Scheduled runs sent before the job ends (manual runs, replays, skipped and missed slots do not count): "
    "it becomes completed when the last one ends, retries included."))]
EndAction = Annotated[vocab.EndAction, OneOf()]
PauseAfter = Annotated[int, Field(ge=1, le=MAX_PAUSE_AFTER_FAILURES, description=(
    "Pause the job after this many consecutive finally-failed runs."))]
StatusCodes = Annotated[list[Any], Field(min_length=1, max_length=success.MAX_STATUS_CODES, json_schema_extra={
    "items": {"anyOf": [{"type": "integer", "minimum": 100, "maximum": 599},
                        {"type": "string", "pattern": "^[1-5]xx$"}]}}),
    AfterValidator(success.normalized_codes)]
BodyContains = Annotated[str, StringConstraints(min_length=1, max_length=success.MAX_BODY_CONTAINS),
                         AfterValidator(_storable)]
CalendarName = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=CALENDAR_NAME_PATTERN),
                        Field(examples=["us-holidays"])]
OnExcluded = Annotated[vocab.OnExcluded, OneOf()]
CatchupWindow = Annotated[int, Field(ge=0, le=MAX_CATCHUP_WINDOW_SECONDS, description=(
    "A slot later than this (after an outage) is recorded missed instead of run; under 5 s late is never missed. "
    "At most 10,080 of the schedule's shortest gaps between runs (every second: 10,080 s)."))]
SpreadSeconds = Annotated[int, Field(ge=0, le=MAX_SPREAD_SECONDS, description=(
    "Every run is moved later by the job's own offset in [0, spread_seconds], derived from the job id and "
    "stable across updates, so jobs written for the same instant do not all fire at once. At most the "
    "schedule's shortest interval."))]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ---------------------------------------------------------------- requests

class RequestAuthSpec(_Strict):
    """Sign the request with AWS SigV4 as the role (assumed with ExternalId = your tenant id; it must match the
    deployment's target role pattern): for Lambda Function URLs and API Gateway routes with IAM auth."""

    type: Literal["aws_iam"]
    role_arn: Annotated[str, StringConstraints(min_length=1, max_length=2048),
                        Field(examples=["arn:aws:iam::123456789012:role/tickwork-target-reports"])]
    service: Annotated[str, StringConstraints(pattern=r"^[a-z0-9-]{1,64}$"), Field(examples=["lambda", "execute-api"])]
    region: Annotated[str, StringConstraints(pattern=r"^[a-z]{2}(-[a-z]+)+-\d{1,2}$"), Field(examples=["us-east-1"])]


class RequestSpec(_Strict):
    """The HTTP request a job sends. Without `method`: POST when a body is given, else GET."""

    method: HttpMethod | None = None
    url: Url
    # Not in repr: powertools logs a route's arguments at DEBUG, and sensitive values must not reach logs.
    headers: Headers = Field(default_factory=dict, repr=False)
    body: RequestBody | None = None
    timeout_seconds: Timeout = DEFAULT_TIMEOUT_SECONDS
    auth: RequestAuthSpec | None = None


class SqsParametersSpec(_Strict):
    message_group_id: str | None = Field(None, description="Required for a FIFO queue.")


class EventBridgeParametersSpec(_Strict):
    detail_type: str
    source: str


class LambdaParametersSpec(_Strict):
    invocation_type: Literal["Event", "RequestResponse"] = Field("Event", description=(
        "Event: accepted is a successful attempt. RequestResponse: the attempt is the function's run (a function "
        "error fails it; its payload is the answer kept)."))


class TargetSpec(BaseModel):
    """An AWS target, shaped as EventBridge Scheduler's Target (docs/api.md, "AWS targets"): the kind is the ARN's
    service (Lambda, SQS, SNS, EventBridge, Step Functions). Scheduler's fields Tickwork does not take are refused
    by name."""

    model_config = ConfigDict(extra="allow")  # named by tickwork.targetspec.aws, which says why each is refused

    arn: str = Field(description="What to call: a Lambda function, SQS queue, SNS topic, event bus or state machine.")
    role_arn: str = Field(description=(
        "The role Tickwork assumes to call it, with ExternalId = your tenant id; it must match the deployment's "
        "TargetRolePattern."))
    input: str | None = Field(None, description=(
        "What is sent, with Scheduler's <aws.scheduler.*> placeholders and ${secrets.NAME}; default: the run's "
        "execution id, schedule ARN (the job id) and scheduled time, as JSON."))
    timeout_seconds: float | None = Field(None, gt=0, description="How long an attempt waits for the service.")
    sqs_parameters: SqsParametersSpec | None = None
    eventbridge_parameters: EventBridgeParametersSpec | None = Field(None, description="Required for an event bus.")
    lambda_parameters: LambdaParametersSpec | None = None


class RetrySpec(_Strict):
    strategy: Strategy = cast(Strategy, DEFAULT_STRATEGY)
    max_attempts: MaxAttempts = DEFAULT_MAX_ATTEMPTS
    delay_seconds: DelaySeconds = DEFAULT_DELAY_SECONDS
    jitter: Jitter = Field(DEFAULT_JITTER, description=(
        "Spread each wait: full (uniform in [0, wait)), equal (in [wait/2, wait)) or none."))
    max_delay_seconds: MaxDelay = DEFAULT_MAX_DELAY_SECONDS
    past_next_run: bool = Field(DEFAULT_PAST_NEXT_RUN, description=(
        "Whether a retry may land after the job's next run; if not, the run ends failed instead."))


class NotifySpec(_Strict):
    """Where to send the job's events (signed like every request), and which."""

    url: Url
    on: list[NotifyOn] = Field(default_factory=lambda: list(ON_CHOICES), min_length=1)


class SuccessSpec(_Strict):
    """Which answers are a successful attempt; any other is a failed one, retried per the retry policy."""

    status_codes: StatusCodes = Field(default_factory=lambda: list(success.DEFAULT_STATUS_CODES), description=(
        'Accepted codes (200) and classes ("2xx").'))
    body_contains: BodyContains | None = Field(None, description=(
        "Text the response body (its first 4 KiB) must contain."))


class CompletionSpec(_Strict):
    """How a run ends: by the target's answer (response), or by the target calling the URL it was sent in
    Tickwork-Callback-Url once its work is done (callback)."""

    mode: Literal["response", "callback"] = "response"
    timeout_seconds: int | None = Field(None, ge=1, le=completion_rules.MAX_TIMEOUT_SECONDS, description=(
        "callback only: how long a run awaits its callback after the target accepted it; then its attempt fails "
        f"(default {completion_rules.DEFAULT_TIMEOUT_SECONDS})."))


class CalendarSpec(_Strict):
    """Calendars whose dates the job does not run on (PUT /calendars/{name}), judged on its time zone's wall clock."""

    exclude: Annotated[list[CalendarName], Field(min_length=1, max_length=MAX_EXCLUDE), AfterValidator(_distinct)]
    on_excluded: OnExcluded = Field(DEFAULT_ON_EXCLUDED, description=(
        "A slot on an excluded date: recorded skipped naming the calendar (skip), or run at the same wall-clock "
        "time on the next date no calendar excludes (next_day; a moved slot at the time of a regular one is one run)."))


class JobCreate(_Strict):
    name: Name
    schedule: ScheduleText
    timezone: TimeZoneName = "UTC"
    start_at: Instant | None = None
    end_at: Instant | None = None
    request: RequestSpec | None = Field(None, description="The HTTP request the job sends; or give `target`.")
    target: TargetSpec | None = Field(None, description="The AWS target the job calls; or give `request`.")
    retry: RetrySpec = Field(default_factory=RetrySpec)
    overlap: Overlap = Field(DEFAULT_OVERLAP, description=(
        "When a run is due while the previous one is still in progress: run both (allow), record the new one "
        "skipped (skip), or run it once the current one ends, skipping any further (queue_one)."))
    catchup: Catchup = Field(DEFAULT_CATCHUP, description=(
        "After an outage: run only the latest slot inside the catch-up window (latest) or every one (all)."))
    catchup_window_seconds: CatchupWindow = DEFAULT_CATCHUP_WINDOW_SECONDS
    spread_seconds: SpreadSeconds = 0
    tags: Tags = Field(default_factory=list, description=(
        "Up to 20 labels to find the job by (GET /jobs?tag=); a repeated tag is kept once."))
    description: Description = ""
    notify: NotifySpec | None = None
    pause_after_failures: PauseAfter | None = None
    success: SuccessSpec | None = None
    key: JobKey | None = Field(None, description=(
        "The job's stable name, unique among the tenant's jobs: PUT /jobs/by-key/{key} creates or replaces it. "
        "Cannot change once set."))
    source: Source | None = Field(None, description=(
        "A label for what manages the job (a jobs file applied by the CLI, a CloudFormation stack): "
        "`tickwork apply --prune` only deletes jobs of its own file's label."))
    completion: CompletionSpec = Field(default_factory=CompletionSpec)
    calendar: CalendarSpec | None = None
    max_runs: MaxRuns | None = None
    end_action: EndAction = Field(vocab.EndAction.NONE, description=(
        "Once the job's last run ended (max_runs reached, end_at or a single at() passed): keep it, completed "
        "(none), or delete it, its runs kept (delete)."))


class RequestPatch(_Strict):
    """Fields given replace the stored ones; `headers` replaces the whole set, where a sensitive header sent
    back as "***" keeps its stored value."""

    method: Unchanged[HttpMethod] = None
    url: Unchanged[Url] = None
    headers: Unchanged[Headers] = Field(None, repr=False)
    body: RequestBody | None = None
    timeout_seconds: Unchanged[Timeout] = None
    auth: RequestAuthSpec | None = Field(None, description="null removes the signature.")


class RetryPatch(_Strict):
    strategy: Unchanged[Strategy] = None
    max_attempts: Unchanged[MaxAttempts] = None
    delay_seconds: Unchanged[DelaySeconds] = None
    jitter: Unchanged[Jitter] = None
    max_delay_seconds: Unchanged[MaxDelay] = None
    past_next_run: Unchanged[bool] = None


class JobPatch(_Strict):
    """A partial update: only the fields present change; `start_at`/`end_at`, `notify`,
    `pause_after_failures` and `success` may be set to null to clear them."""

    name: Unchanged[Name] = None
    schedule: Unchanged[ScheduleText] = None
    timezone: Unchanged[TimeZoneName] = None
    start_at: Instant | None = None
    end_at: Instant | None = None
    request: Unchanged[RequestPatch] = None
    target: Unchanged[TargetSpec] = Field(None, description="Replaces the whole target of a job that has one.")
    retry: Unchanged[RetryPatch] = None
    overlap: Unchanged[Overlap] = None
    catchup: Unchanged[Catchup] = None
    catchup_window_seconds: Unchanged[CatchupWindow] = None
    spread_seconds: Unchanged[SpreadSeconds] = None
    tags: Unchanged[Tags] = Field(None, description="Replaces the whole set; [] removes every tag.")
    description: Unchanged[Description] = None
    notify: NotifySpec | None = None
    pause_after_failures: PauseAfter | None = None
    success: SuccessSpec | None = None
    key: Unchanged[JobKey] = Field(None, description="Sets the key of a job that has none; a set key cannot change.")
    source: Source | None = Field(None, description="null clears it.")
    completion: Unchanged[CompletionSpec] = Field(None, description="Replaces the whole setting.")
    calendar: CalendarSpec | None = Field(None, description="null clears it.")
    max_runs: MaxRuns | None = Field(None, description="null clears it.")
    end_action: Unchanged[EndAction] = None


class PreviewRequest(_Strict):
    schedule: ScheduleText
    timezone: TimeZoneName = "UTC"
    count: int = Field(DEFAULT_PREVIEW_COUNT, ge=1, le=MAX_PREVIEW_COUNT)
    after: Instant | None = Field(None, description="Fire times strictly after this instant; default now.")
    start_at: Instant | None = None
    end_at: Instant | None = None
    job_id: UUID | None = Field(None, description=(
        "The job the times are for: H and the spread offset are derived from its id (not looked up; a job "
        "not created yet has none). Default 00000000-0000-0000-0000-000000000000."))
    spread_seconds: SpreadSeconds = 0
    calendar: CalendarSpec | None = Field(None, description=(
        "As a job's: fire_times then lists every slot, those skipped with excluded_by, those moved with moved_from."))


ReplayStatus = Annotated[vocab.RunStatus, OneOf(*replay.REPLAYABLE)]


class ReplayRequest(_Strict):
    since: Instant = Field(description="Runs whose slot is at or after this time.")
    until: Instant = Field(description=f"Runs whose slot is before this time: later than since, at most "
                                       f"{replay.MAX_WINDOW.days} days after it, holding at most {replay.MAX_RUNS} "
                                       "runs to replay.")
    statuses: list[ReplayStatus] = Field(list(replay.DEFAULT_STATUSES), min_length=1, max_length=4,
                                         description="Runs in any of these states are replayed.")
    dry_run: StrictBool = Field(False, description="Count and list the runs, and when they would go; change nothing.")


# ---------------------------------------------------------------- API keys

ApiScope = Literal[access.ALL_SCOPES]  # type: ignore[valid-type]


class ApiKeyCreate(_Strict):
    name: Name = Field(examples=["ci"], description="A label for the key's owner: a person, a system, a laptop.")
    scopes: Unchanged[list[ApiScope]] = Field(
        None, examples=[["jobs:read"]],
        description="What the key may do (docs/api.md, \"Scopes\"); default: every scope the creating key holds. "
                    "A key gives only scopes it holds itself.")
