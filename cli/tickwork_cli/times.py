"""Times as people read them (the user's zone, or UTC) and as the API takes them (RFC 3339 with an offset)."""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone, tzinfo

from tickwork_cli.errors import CliError

_AGO = re.compile(r"^(\d+)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_api_time(text: str) -> datetime:
    """An API time (`2026-03-12T19:04:00.000Z`) as an aware datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def show(text: str | None, zone: tzinfo | None) -> str:
    """An API time in `zone` (None: the local zone, from TZ or the system), to the second, with its offset."""
    if not text:
        return "-"
    moment = parse_api_time(text)
    if zone is timezone.utc:
        return moment.strftime("%Y-%m-%d %H:%M:%S UTC")
    return moment.astimezone(zone).isoformat(sep=" ", timespec="seconds")


def since_value(text: str, now: datetime) -> str:
    """`--since`: an RFC 3339 time with an offset, or an age back from `now` (`30m`, `2h`, `7d`)."""
    match = _AGO.match(text.strip())
    if match:
        moment = now - timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
    else:
        try:
            moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        except ValueError:
            raise CliError(f"--since: {text!r} is neither a time like 2026-03-12T19:04:00Z "
                           "nor an age like 30m, 2h, 7d") from None
        if moment.tzinfo is None:
            raise CliError("--since: give the time an offset (Z or +02:00)")
    return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
