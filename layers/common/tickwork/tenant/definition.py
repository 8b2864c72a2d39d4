"""A job's definition (what a PUT by key sets) as the API shows it, flattened to dotted paths, and what differs
between two versions of a job: what a plan shows (tickwork.tenant.bykey) and an update records
(tickwork.tenant.audit). Pure: no I/O."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tickwork.http.redaction import REDACTED, is_sensitive_header
from tickwork.models import DEFINITION_FIELDS, JobDraft, part_json
from tickwork.timeutil import rfc3339


@dataclass(frozen=True)
class FieldChange:
    """One field of the definition, by its dotted path (`request.url`, `request.headers.X-Team`), as shown
    by the API: sensitive header values as REDACTED."""

    field: str
    old: Any
    new: Any


def definition_changes(old: JobDraft, new: JobDraft) -> tuple[FieldChange, ...]:
    """The fields of the definition that differ, in a stable order; a sealed value that differs shows as
    REDACTED on both sides."""
    before, after = definition(old), definition(new)
    names = list(before) + [name for name in after if name not in before]
    return tuple(
        FieldChange(name, shown(name, before.get(name)), shown(name, after.get(name)))
        for name in names if before.get(name) != after.get(name)
    )


def definition(job: JobDraft) -> dict[str, Any]:
    """The job's definition (what a PUT sets but its key) flattened to dotted paths, values as stored; the
    request's and the retry policy's fields each on their own."""
    flat: dict[str, Any] = {}
    for name in DEFINITION_FIELDS:
        value = part_json(getattr(job, name))
        if name in _FLATTENED and value is not None:
            flat.update({f"{name}.{inner}": part for inner, part in value.items() if inner != "headers"})
            flat.update({f"{name}.headers.{header}": part for header, part in (value.get("headers") or {}).items()})
        elif name != "key":
            flat[name] = rfc3339(value) if isinstance(value, datetime) else value
    return flat


_FLATTENED = ("request", "retry")


def shown(name: str, value: Any) -> Any:
    """A definition field's value as the API shows it: a sensitive header's as REDACTED."""
    if value is not None and name.startswith("request.headers.") and is_sensitive_header(name.split(".", 2)[2]):
        return REDACTED
    return value
