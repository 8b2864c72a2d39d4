"""A job's definition (what a PUT by key sets) as the API shows it, flattened to dotted paths, and what differs
between two versions of a job: what a plan shows (tickwork.tenant.bykey) and an update records
(tickwork.tenant.audit). Pure: no I/O."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tickwork.http.redaction import REDACTED, is_sensitive_header
from tickwork.models import JobRow
from tickwork.timeutil import rfc3339


@dataclass(frozen=True)
class FieldChange:
    """One field of the definition, by its dotted path (`request.url`, `request.headers.X-Team`), as shown
    by the API: sensitive header values as REDACTED."""

    field: str
    old: Any
    new: Any


def definition_changes(old: JobRow, new: JobRow) -> tuple[FieldChange, ...]:
    """The fields of the definition that differ, in a stable order; a sealed value that differs shows as
    REDACTED on both sides."""
    before, after = definition(old), definition(new)
    names = list(before) + [name for name in after if name not in before]
    return tuple(
        FieldChange(name, shown(name, before.get(name)), shown(name, after.get(name)))
        for name in names if before.get(name) != after.get(name)
    )


def definition(job: JobRow) -> dict[str, Any]:
    """The job's definition (what a PUT sets) flattened to dotted paths, values as stored."""
    flat: dict[str, Any] = {"name": job.name, "schedule": job.schedule, "timezone": job.timezone,
                            "start_at": rfc3339(job.start_at), "end_at": rfc3339(job.end_at),
                            "spread_seconds": job.spread_seconds}
    request = job.request
    flat.update({f"request.{name}": value for name, value in request.items() if name != "headers"})
    flat.update({f"request.headers.{name}": value for name, value in (request.get("headers") or {}).items()})
    flat.update({f"retry.{name}": value for name, value in job.retry.items()})
    flat.update({"overlap": job.overlap, "catchup": job.catchup, "catchup_window_seconds": job.catchup_window_seconds,
                 "tags": list(job.tags), "description": job.description, "notify": job.notify,
                 "pause_after_failures": job.pause_after_failures, "success": job.success, "source": job.source,
                 "completion": job.completion, "calendar": job.calendar})
    return flat


def shown(name: str, value: Any) -> Any:
    """A definition field's value as the API shows it: a sensitive header's as REDACTED."""
    if value is not None and name.startswith("request.headers.") and is_sensitive_header(name.split(".", 2)[2]):
        return REDACTED
    return value
