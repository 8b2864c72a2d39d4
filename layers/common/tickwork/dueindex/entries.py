"""What the due index holds, as members of its sorted sets: a job (`j:<id>`), scored by its next slot, and
one-shot dispatches of an execution (`e:<id>:<attempt>`), a notification (`n:<id>:<attempt>`) or the check of a
run awaiting its completion callback at its deadline (`c:<id>:<attempt>`, tickwork.runs.completion)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

JOB_PREFIX = "j:"
EXECUTION_PREFIX = "e:"
NOTIFICATION_PREFIX = "n:"
COMPLETION_PREFIX = "c:"


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


@dataclass(frozen=True)
class DueEntry:
    member: str
    score: int
    spec: dict[str, Any] | None

    @property
    def is_job(self) -> bool:
        return self.member.startswith(JOB_PREFIX)

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
class DuePage:
    """One fetch of the due set (tickwork.dueindex.shard.Shard.fetch_page)."""

    intact: bool  # the index marker exists
    entries: list[DueEntry]
    counts: list[int]  # members due in each whole second asked for (the adaptive lookahead)
    older: int  # members scored below the fetch's lower bound
