"""What a list of jobs, executions or audit entries is narrowed to. Plain values: the API checks them, the stores
turn them into SQL."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class JobFilter:
    """Jobs in any of `statuses` (all when empty), carrying every one of `tags`, named `name_prefix`…, with
    this `key`, managed by this `source`."""

    statuses: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    name_prefix: str | None = None
    key: str | None = None
    source: str | None = None


@dataclass(frozen=True)
class ExecutionFilter:
    """Executions in any of `statuses` (all when empty), of `job_id`, slot in [`since`, `until`)."""

    statuses: tuple[str, ...] = ()
    job_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None


@dataclass(frozen=True)
class AuditFilter:
    """Audit entries of `job_id`, of `action`, made in [`since`, `until`) (each None: any)."""

    job_id: str | None = None
    action: str | None = None
    since: datetime | None = None
    until: datetime | None = None


def like_prefix(prefix: str) -> str:
    """A LIKE pattern matching exactly the strings that start with `prefix` (backslash is LIKE's escape)."""
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "%"
