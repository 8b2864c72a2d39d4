"""Conversions between aware datetimes, epoch milliseconds (the due-index score) and RFC 3339."""
from __future__ import annotations

from datetime import datetime, timezone


def to_ms(dt: datetime) -> int:
    if dt.tzinfo is None:
        raise ValueError("naive datetime: Tickwork only handles aware datetimes")
    return int(dt.timestamp() * 1000 + (0.5 if dt.timestamp() >= 0 else -0.5))


def from_ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


def rfc3339(dt: datetime | None) -> str | None:
    """UTC, millisecond precision, `Z` suffix: the one time format of the API."""
    if dt is None:
        return None
    utc = dt.astimezone(timezone.utc)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def parse_rfc3339(value: str) -> datetime:
    """Parse an RFC 3339 timestamp; a value without an offset is rejected by the caller's validation."""
    dt = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    if dt.tzinfo is None:
        raise ValueError("timestamp has no UTC offset")
    return dt
