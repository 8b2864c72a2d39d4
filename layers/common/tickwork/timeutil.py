"""Conversions between aware datetimes, epoch milliseconds (the due-index score) and RFC 3339."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MS = timedelta(milliseconds=1)
# The instants Tickwork takes and computes, [EARLIEST, LATEST): from the epoch the due index counts in, to a
# year far enough below datetime's 9999 that schedule maths (cron looks 60 years ahead, zone rules a year
# either side) never leaves datetime's range.
EARLIEST = EPOCH
LATEST = datetime(9000, 1, 1, tzinfo=timezone.utc)


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
    # Not strftime("%Y"): glibc writes year 814 as "814", which is not RFC 3339.
    return f"{utc.year:04d}-{utc:%m-%dT%H:%M:%S}.{utc.microsecond // 1000:03d}Z"


def supported(dt: datetime) -> bool:
    """Whether an aware datetime lies in [EARLIEST, LATEST); compared as is, since converting one near
    year 1 or 9999 to UTC can overflow."""
    return EARLIEST <= dt < LATEST


def floor_to_ms(dt: datetime) -> datetime:
    """The millisecond the API shows for `dt`, so a time read back and sent again is the same time."""
    return dt - timedelta(microseconds=dt.microsecond % 1000)


def parse_rfc3339(value: str) -> datetime:
    """Parse an RFC 3339 timestamp; a value without an offset is rejected by the caller's validation."""
    dt = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    if dt.tzinfo is None:
        raise ValueError("timestamp has no UTC offset")
    return dt
