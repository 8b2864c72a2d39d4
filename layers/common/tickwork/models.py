"""Domain values shared by the poller, the executor and the API. No I/O here."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Generic, Mapping, TypeVar

from tickwork.vocab import DispatchKind

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


@dataclass(frozen=True)
class JobRow:
    """A job as stored in Postgres."""

    id: str
    tenant_id: str
    name: str
    schedule: str
    timezone: str
    start_at: datetime | None
    end_at: datetime | None
    request: dict[str, Any]
    retry: dict[str, Any]
    status: str
    next_run_at: datetime | None
    version: int
    created_at: datetime
    updated_at: datetime
    overlap: str = "allow"
    catchup: str = "latest"
    catchup_window_seconds: int = 300
    tags: list[str] = field(default_factory=list)
    description: str = ""
    notify: dict[str, Any] | None = None
    pause_after_failures: int | None = None
    paused_reason: str | None = None
    success: dict[str, Any] | None = None
    key: str | None = None  # its stable name for PUT /jobs/by-key/{key}; immutable once set
    source: str | None = None  # the label of what manages it (a jobs file, a stack)
    spread_seconds: int = 0
    completion: dict[str, Any] | None = None  # None: the answer ends a run; else tickwork.rules.completion
    calendar: dict[str, Any] | None = None  # {"exclude": [calendar names], "on_excluded": "skip" | "next_day"}
    # In quarantine (tickwork.rules.quarantine): why, since when, failures in a row, claimable again from.
    error_reason: str | None = None
    errored_at: datetime | None = None
    error_count: int | None = None
    retry_errored_at: datetime | None = None


@dataclass(frozen=True)
class StartedExecution:
    """What the executor needs once it has won the right to run an attempt."""

    id: str
    job_id: str
    tenant_id: str
    scheduled_for: datetime
    attempt: int
    request: dict[str, Any]
    retry: dict[str, Any]
    overlap: str = "allow"
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
