"""Per-job values: cron's `H` (Jenkins, croniter) and the spread offset, both derived from the job id.

Pure and stable: the same job id gives the same values on every host, process and release, so a job keeps
its minute and its second across updates. Never Python's hash(), which is salted per process. The exact
derivations are in docs/schedules.md ("H: a per-job value" and "Spread").
"""
from __future__ import annotations

import hashlib
import re
import zlib

from tickwork.errors import ScheduleError
from tickwork.schedule.cron import DOM, DOW, HOUR, MIN, MON, SEC, _BOUNDS, _fail, _step, _value

# What an H is hashed with when there is no job yet (POST /schedules/preview without job_id).
PREVIEW_KEY = "00000000-0000-0000-0000-000000000000"
MAX_SPREAD_SECONDS = 3600
_H_TERM = re.compile(r"^H(?:\(([^)]*)\))?(?:/(.*))?$")
# An H outside a name (THU has one): the first letter of a field or list item, or after a range or step.
_H_ANYWHERE = re.compile(r"(?<![A-Z])H")
# croniter numbers its fields minute 0, hour 1, day-of-month 2, month 3, day-of-week 4, second 5 and
# shifts the hash by that number: the same shift gives the values croniter gives for the same hash_id.
_CRONITER_FIELD = {MIN: 0, HOUR: 1, DOM: 2, MON: 3, DOW: 4, SEC: 5}
# Where a bare H (and H/n) draws from: day-of-month stops at 28 (Jenkins' rule) so the job runs every
# month; day-of-week is 0-6, 7 being Sunday again.
_H_BOUNDS = {**dict(enumerate(_BOUNDS)), DOM: (1, 28), DOW: (0, 6)}


def is_hashed(canonical: str) -> bool:
    """Whether a canonical schedule has an H in a cron field (rate() and at() never do)."""
    return not canonical.startswith(("rate(", "at(")) and _H_ANYWHERE.search(canonical) is not None


def per_job(canonical: str, hash_key: str | None, spread_seconds: int) -> tuple[str, str | None, int]:
    """(canonical, the key H is resolved with or None without an H, the spread offset in ms)."""
    if hash_key is None and (spread_seconds or is_hashed(canonical)):
        raise ScheduleError("H and spread_seconds need the job id to derive the job's own values")
    key = hash_key if is_hashed(canonical) else None
    offset = 0 if hash_key is None else spread_offset_seconds(hash_key, spread_seconds)
    return canonical, key, offset * 1000


def resolve(canonical: str, key: str) -> str:
    """`canonical` with each H field replaced by the values it stands for under `key` (the job id)."""
    return " ".join(_field(index, text, key) for index, text in enumerate(canonical.split(" ")))


def _field(index: int, text: str, key: str) -> str:
    if not _H_ANYWHERE.search(text):
        return text
    match = _H_TERM.match(text)
    if match is None:
        raise _fail(index, "H stands alone in its field: H, H/n, H(a-b) or H(a-b)/n")
    span, step_text = match.groups()
    low, high = _H_BOUNDS[index] if span is None else _span(index, span)
    if step_text is None:
        return str(_draw(key, index, low, high))
    step = _step(index, step_text)
    first = _draw(key, index, low, min(low + step - 1, high))
    return str(first) if first == high else f"{first}-{high}/{step}"


def _span(index: int, span: str) -> tuple[int, int]:
    start, dash, end = span.partition("-")
    if not dash or not start.isdecimal() or not end.isdecimal():
        raise _fail(index, "H(a-b) needs two numbers, e.g. H(0-29)")
    low, high = _value(index, start), _value(index, end)
    if low >= high:
        raise _fail(index, "the range of H(a-b) must go from a lower to a higher value")
    return low, high


def _draw(key: str, index: int, low: int, high: int) -> int:
    """croniter's HashExpander: CRC-32 of the key's UTF-8 bytes, shifted by the field's number."""
    crc = zlib.crc32(key.encode()) & 0xFFFFFFFF
    return (crc >> _CRONITER_FIELD[index]) % (high - low + 1) + low


def spread_offset_seconds(key: str, spread_seconds: int) -> int:
    """The job's offset in [0, spread_seconds]: the first 8 bytes of SHA-256(job id), big-endian,
    modulo spread_seconds + 1."""
    if not 0 <= spread_seconds <= MAX_SPREAD_SECONDS:
        raise ScheduleError(f"must be 0 to {MAX_SPREAD_SECONDS} seconds", "spread_seconds")
    if spread_seconds == 0:
        return 0
    digest = hashlib.sha256(key.encode()).digest()
    return int.from_bytes(digest[:8], "big") % (spread_seconds + 1)
