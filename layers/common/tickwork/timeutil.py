"""Conversions between aware datetimes, epoch milliseconds (the due-index score) and RFC 3339."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MS = timedelta(milliseconds=1)


def to_ms(dt: datetime) -> int:
    """Exact integer arithmetic (floor to the millisecond), matching date_trunc('milliseconds') in SQL."""
    if dt.tzinfo is None:
        raise ValueError("naive datetime: Tickwork only handles aware datetimes")
    return (dt - EPOCH) // _MS


def from_ms(ms: int) -> datetime:
    return EPOCH + timedelta(milliseconds=ms)


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
