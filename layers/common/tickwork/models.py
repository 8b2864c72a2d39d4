"""Domain values shared by the poller, the executor and the API. No I/O here."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, Callable, Generic, Mapping, TypeVar

from tickwork import defaults
from tickwork.targetspec.aws import AwsTargetSpec
from tickwork.vocab import DispatchKind, EndAction, JobStatus

T = TypeVar("T")
Key = tuple[datetime, str]  # a keyset position: (created_at or scheduled_for, id)


@dataclass(frozen=True)
class Dispatch:
    """One hand-off from the poller to an executor: run `attempt` of an execution at `fire_at_ms`.

    The attempt number makes a stale or duplicated delivery harmless: the executor only starts an
    execution whose recorded attempt count is `attempt - 1`.
    """

    execution_id: str
    attempt: int
    fire_at_ms: int
    kind: str = DispatchKind.RUN  # a tickwork.vocab.DispatchKind (an unknown one, from a newer sender, is ignored)
    # The tenant whose runs in flight this dispatch counts among (tickwork.dispatch.budget): its executor gives
    # the place back when it ends. Empty: it holds none. Bookkeeping, not what is dispatched: not compared.
    tenant_id: str = field(default="", compare=False)

    def to_dict(self) -> dict[str, Any]:
        raw: dict[str, Any] = {"execution_id": self.execution_id, "attempt": self.attempt, "fire_at_ms": self.fire_at_ms}
        if self.kind != DispatchKind.RUN:
            raw["kind"] = self.kind
        if self.tenant_id:
            raw["tenant_id"] = self.tenant_id
        return raw

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Dispatch:
        return cls(str(raw["execution_id"]), int(raw["attempt"]), int(raw["fire_at_ms"]),
                   str(raw.get("kind", DispatchKind.RUN)), str(raw.get("tenant_id", "")))


def executor_event(dispatches: list[Dispatch]) -> dict[str, Any]:
    """The executor Lambda's event: a list so a burst can group several runs per invocation."""
    return {"dispatches": [d.to_dict() for d in dispatches]}


def dispatches_from_event(event: Mapping[str, Any]) -> list[Dispatch]:
    return [Dispatch.from_dict(item) for item in event.get("dispatches", [])]


# ---------------------------------------------------------------- the job and its parts
# Each part is parsed from its JSON form once, where it enters (the store reading a row, the API reading a
# body: `from_dict`), and written back by `to_dict`. A field a stored part lacks (a job older than the field)
# takes the value that keeps the behaviour it had.

@dataclass(frozen=True)
class RequestAuth:
    """How a job's request is signed: `aws_iam`, SigV4 with the role's session (tickwork.http.sigv4)."""

    type: str
    role_arn: str
    service: str
    region: str

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> RequestAuth:
        return cls(raw["type"], raw["role_arn"], raw["service"], raw["region"])

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "role_arn": self.role_arn, "service": self.service, "region": self.region}


@dataclass(frozen=True)
class HttpRequest:
    """The HTTP request a job sends. Header values may be sealed (tickwork.secrets.vault)."""

    url: str
    method: str | None = None  # none given: POST with a body, else GET (set when the job is stored)
    headers: Mapping[str, str] = field(default_factory=dict)
    body: str | None = None
    timeout_seconds: int = defaults.REQUEST_TIMEOUT_SECONDS
    auth: RequestAuth | None = None  # none: sent unsigned (but for the Standard Webhooks signature)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> HttpRequest:
        auth = raw.get("auth")
        return cls(url=raw["url"], method=raw.get("method"), headers=dict(raw.get("headers") or {}),
                   body=raw.get("body"), timeout_seconds=raw.get("timeout_seconds", defaults.REQUEST_TIMEOUT_SECONDS),
                   auth=None if auth is None else RequestAuth.from_dict(auth))

    def to_dict(self) -> dict[str, Any]:
        """Without `auth` when there is none: what a job stored before it existed is unchanged."""
        shown = {"method": self.method, "url": self.url, "headers": dict(self.headers), "body": self.body,
                 "timeout_seconds": self.timeout_seconds}
        return shown if self.auth is None else {**shown, "auth": self.auth.to_dict()}


@dataclass(frozen=True)
class RetryPolicy:
    """When a failed attempt is tried again (tickwork.rules.retry); its defaults are a stored job's."""

    strategy: str = defaults.RETRY_STRATEGY
    max_attempts: int = defaults.RETRY_MAX_ATTEMPTS
    delay_seconds: float = defaults.RETRY_DELAY_SECONDS
    jitter: str = defaults.STORED_RETRY_JITTER
    max_delay_seconds: float = defaults.STORED_RETRY_MAX_DELAY_SECONDS
    past_next_run: bool = defaults.STORED_RETRY_PAST_NEXT_RUN

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any] | None) -> RetryPolicy:
        """A stored policy; numbers keep their JSON type (a delay of 10 is shown as 10, not 10.0)."""
        given = {name: (raw or {})[name] for name in _RETRY_FIELDS if name in (raw or {})}
        return cls(**given)

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _RETRY_FIELDS}


_RETRY_FIELDS = ("strategy", "max_attempts", "delay_seconds", "jitter", "max_delay_seconds", "past_next_run")


@dataclass(frozen=True)
class Notify:
    """Where a job's events go (tickwork.rules.notifications), and which."""

    url: str
    on: tuple[str, ...] = defaults.NOTIFY_ON

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Notify:
        return cls(raw["url"], tuple(raw.get("on", defaults.NOTIFY_ON)))

    def to_dict(self) -> dict[str, Any]:
        return {"url": self.url, "on": list(self.on)}


@dataclass(frozen=True)
class SuccessRule:
    """Which answers are a successful attempt (tickwork.rules.success)."""

    status_codes: tuple[int | str, ...]
    body_contains: str | None = None

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> SuccessRule:
        return cls(tuple(raw["status_codes"]), raw.get("body_contains"))

    def to_dict(self) -> dict[str, Any]:
        return {"status_codes": list(self.status_codes), "body_contains": self.body_contains}


@dataclass(frozen=True)
class Completion:
    """How a job's runs end (tickwork.rules.completion): a stored job has one only in callback mode, with its
    timeout; a job without one ends them by the answer. As given to the API, either mode, the timeout optional."""

    mode: str
    timeout_seconds: int | None = None

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Completion:
        return cls(raw["mode"], raw.get("timeout_seconds"))

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "timeout_seconds": self.timeout_seconds}


@dataclass(frozen=True)
class CalendarRef:
    """The calendars whose dates a job does not run on, by name, and what becomes of a slot on one."""

    exclude: tuple[str, ...]
    on_excluded: str = defaults.ON_EXCLUDED

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> CalendarRef:
        return cls(tuple(raw.get("exclude") or ()), raw.get("on_excluded", defaults.ON_EXCLUDED))

    def to_dict(self) -> dict[str, Any]:
        return {"exclude": list(self.exclude), "on_excluded": self.on_excluded}


@dataclass(frozen=True, kw_only=True)
class JobDraft:
    """A job's definition: what a create or a PUT sets, in the order a plan and the audit list its fields.
    A new field of a job goes here (or in `Job`, for state), with its default; the store, the PATCH and PUT
    rules, the definition and the view follow the fields."""

    name: str
    schedule: str
    timezone: str = defaults.TIMEZONE
    start_at: datetime | None = None
    end_at: datetime | None = None
    spread_seconds: int = defaults.SPREAD_SECONDS
    request: HttpRequest | None = None  # exactly one of request (HTTP) and target (AWS)
    target: AwsTargetSpec | None = None
    retry: RetryPolicy
    overlap: str = defaults.OVERLAP
    catchup: str = defaults.CATCHUP
    catchup_window_seconds: int = defaults.CATCHUP_WINDOW_SECONDS
    tags: tuple[str, ...] = ()
    description: str = ""
    notify: Notify | None = None
    pause_after_failures: int | None = None
    success: SuccessRule | None = None
    source: str | None = None  # the label of what manages it (a jobs file, a stack)
    completion: Completion | None = None  # None: the answer ends a run
    calendar: CalendarRef | None = None
    key: str | None = None  # its stable name for PUT /jobs/by-key/{key}; immutable once set
    max_runs: int | None = None  # how many scheduled runs it sends before it ends (None: no bound)
    end_action: str = EndAction.NONE  # what becomes of it once its last run ended

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> JobDraft:
        """A draft from a validated body (the API's JSON), its parts parsed."""
        return cls(**parsed_parts(body))


# What decides when a job runs: a change to any of it moves the job's version and its next run.
TIMING_FIELDS = ("schedule", "timezone", "start_at", "end_at", "spread_seconds", "calendar")


@dataclass(frozen=True, kw_only=True)
class Job(JobDraft):
    """A job: its definition and its state."""

    id: str
    tenant_id: str
    status: str = JobStatus.ACTIVE
    next_run_at: datetime | None = None
    version: int = 1
    created_at: datetime
    updated_at: datetime
    paused_reason: str | None = None
    # In quarantine (tickwork.rules.quarantine): why, since when, failures in a row, claimable again from.
    error_reason: str | None = None
    errored_at: datetime | None = None
    error_count: int | None = None
    retry_errored_at: datetime | None = None
    runs_sent: int = 0  # scheduled runs sent, counted by the poller's claim (max_runs)

    @property
    def timing(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in TIMING_FIELDS)


DEFINITION_FIELDS = tuple(f.name for f in fields(JobDraft))
JOB_FIELDS = tuple(f.name for f in fields(Job))
# The fields held as a typed part, by the part's type; stored as JSON.
JOB_PARTS: dict[str, Any] = {"request": HttpRequest, "target": AwsTargetSpec, "retry": RetryPolicy, "notify": Notify,
                             "success": SuccessRule, "completion": Completion, "calendar": CalendarRef}


def parsed_parts(raw: Mapping[str, Any]) -> dict[str, Any]:
    """`raw` with each part given (as JSON) parsed, None kept, and tags as a tuple."""
    parsed = {name: value if value is None or name not in JOB_PARTS else JOB_PARTS[name].from_dict(value)
              for name, value in raw.items()}
    if parsed.get("tags") is not None:
        parsed["tags"] = tuple(parsed["tags"])
    return parsed


def part_json(value: Any) -> Any:
    """A field's value as JSON holds it: a part as its dict, tags as a list."""
    if hasattr(value, "to_dict"):
        return value.to_dict()
    return list(value) if isinstance(value, tuple) else value


@dataclass(frozen=True)
class StartedExecution:
    """What the executor needs once it has won the right to run an attempt."""

    id: str
    job_id: str
    tenant_id: str
    scheduled_for: datetime
    attempt: int
    request: dict[str, Any]  # an AWS target's job: its stand-in (tickwork.store.jobs.TARGET_STAND_IN)
    retry: dict[str, Any]
    overlap: str = defaults.OVERLAP
    # When this attempt's time began, as Postgres recorded it: its timeout and the sweeper count from here.
    attempt_started_at: datetime | None = None
    success: dict[str, Any] | None = None  # the job's success rules (tickwork.rules.success)
    notify: dict[str, Any] | None = None
    pause_after_failures: int | None = None
    # A replayed run (tickwork.rules.replay): the attempt count its latest replay started from, and how many
    # times it was replayed. The retry policy counts attempts from replay_base.
    replay_base: int = 0
    replay_count: int = 0
    completion: dict[str, Any] | None = None  # how the run ends: None by the answer (tickwork.rules.completion)
    # Its webhook-id when that is not its job's and its own id (tickwork.http.signing.message_id): a
    # notification's is its event id, whose body Tickwork writes, not the job.
    message_id: str | None = None
    target: dict[str, Any] | None = None  # its job's AWS target (tickwork.targetspec.aws), as stored; None: HTTP

    @property
    def replayed(self) -> bool:
        return self.replay_count > 0

    @property
    def watched(self) -> bool:
        """Whether the run's end may raise a notification or pause its job (tickwork.rules.notifications)."""
        return self.notify is not None or self.pause_after_failures is not None


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a keyset-paginated list (jobs, executions, secrets, audit entries)."""

    items: list[T]
    next_key: Key | None  # the keyset position after the last item, None on the last page
    key: Callable[[T], Key] | None = field(default=None, compare=False, repr=False)  # an item's position

    @classmethod
    def of(cls, rows: list[T], limit: int, key: Callable[[T], Key]) -> Page[T]:
        """The page of `rows`, read with one more than `limit` to know whether another page follows."""
        items = rows[:limit]
        return cls(items, key(items[-1]) if len(rows) > limit and items else None, key)

    def first(self, count: int) -> Page[T]:
        """The page cut to its first `count` items (at least one): the next page starts after the last kept."""
        if count >= len(self.items) or self.key is None:
            return self
        kept = self.items[:max(count, 1)]
        return Page(kept, self.key(kept[-1]), self.key)
