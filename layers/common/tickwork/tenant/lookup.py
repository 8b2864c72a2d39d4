"""Looking a tenant's record up by the id in its URL: an id that is not a UUID, a record of another tenant
and one deleted all look the same, not found."""
from __future__ import annotations

import uuid
from typing import TypeVar

from tickwork.errors import NotFoundError

T = TypeVar("T")


def parse_id(raw: str, what: str) -> str:
    """`raw` as a canonical UUID; NotFoundError ("<what> not found") when it is none."""
    try:
        return str(uuid.UUID(raw))
    except (ValueError, TypeError, AttributeError):
        raise NotFoundError(f"{what} not found") from None


def found(row: T | None, what: str) -> T:
    if row is None:
        raise NotFoundError(f"{what} not found")
    return row
