"""What the due index holds, as members of its sorted sets: a job (`j:<id>`), scored by its next slot, and
one-shot dispatches of an execution (`e:<id>:<attempt>`), a notification (`n:<id>:<attempt>`) or the check of a
run awaiting its completion callback at its deadline (`c:<id>:<attempt>`, tickwork.rules.completion).

A member of any other kind belongs to a newer release running beside this one (docs/deploy.md): this one never
claims, moves or removes it, and fetches past it."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tickwork.models import Dispatch
from tickwork.vocab import DispatchKind

JOB_PREFIX = "j:"
EXECUTION_PREFIX = "e:"
NOTIFICATION_PREFIX = "n:"
COMPLETION_PREFIX = "c:"
KNOWN_PREFIXES = frozenset({JOB_PREFIX, EXECUTION_PREFIX, NOTIFICATION_PREFIX, COMPLETION_PREFIX})
_DISPATCH_PREFIXES: dict[str, str] = {
    DispatchKind.RUN: EXECUTION_PREFIX, DispatchKind.NOTIFICATION: NOTIFICATION_PREFIX,
    DispatchKind.COMPLETION: COMPLETION_PREFIX,
}


def encode_spec(spec: dict[str, Any]) -> str:
    return json.dumps(spec, separators=(",", ":"))


def job_member(job_id: str) -> str:
    return f"{JOB_PREFIX}{job_id}"


def execution_member(execution_id: str, attempt: int) -> str:
    return f"{EXECUTION_PREFIX}{execution_id}:{attempt}"


def notification_member(notification_id: str, attempt: int) -> str:
    return f"{NOTIFICATION_PREFIX}{notification_id}:{attempt}"


def completion_member(execution_id: str, attempt: int) -> str:
    return f"{COMPLETION_PREFIX}{execution_id}:{attempt}"


def dispatch_member(dispatch: Dispatch) -> str:
    """The one-shot member a dispatch was claimed from (and goes back as)."""
    return f"{_DISPATCH_PREFIXES[dispatch.kind]}{dispatch.execution_id}:{dispatch.attempt}"


@dataclass(frozen=True)
class DueEntry:
    member: str
    score: int
    spec: dict[str, Any] | None

    @property
    def is_job(self) -> bool:
        return self.member.startswith(JOB_PREFIX)

    @property
    def is_known(self) -> bool:
        """A kind this release handles (any other is left where it is)."""
        return self.member[:2] in KNOWN_PREFIXES

    @property
    def job_id(self) -> str:
        return self.member[len(JOB_PREFIX):]

    @property
    def is_notification(self) -> bool:
        return self.member.startswith(NOTIFICATION_PREFIX)

    @property
    def is_completion(self) -> bool:
        return self.member.startswith(COMPLETION_PREFIX)

    def execution(self) -> tuple[str, int]:
        """(execution or notification id, attempt) of a one-shot member."""
        execution_id, attempt = self.member[len(EXECUTION_PREFIX):].rsplit(":", 1)
        return execution_id, int(attempt)


@dataclass(frozen=True)
class Claim:
    member: str
    expected_score: int
    new_score: int | None  # None removes the member (one-shot dispatch, or a schedule with no more runs)


@dataclass(frozen=True)
class Setting:
    """A member set aside out of the claimable range (tickwork.dispatch.quarantine)."""

    member: str
    expected_score: int | None  # None: claimed away (a one-shot), put back unless someone did already
    failures: int | None  # in a row, counted by the caller (a job's, in Postgres); None: counted in the index


@dataclass(frozen=True)
class SetAside:
    """Where a Setting went: its failures in a row, the score it is claimable again from, whether it moved
    (False: someone else claimed or moved it first)."""

    failures: int
    retry_ms: int
    moved: bool


@dataclass(frozen=True)
class DuePage:
    """One fetch of the due set (tickwork.dueindex.shard.Shard.fetch_page)."""

    intact: bool  # the index marker exists
    entries: list[DueEntry]
    counts: list[int]  # members due in each whole second asked for (the adaptive lookahead)
    older: int  # members scored below the fetch's lower bound
