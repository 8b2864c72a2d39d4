"""Cron expressions evaluated in naive local wall time; time zones and DST live in `tickwork.schedule`."""
from __future__ import annotations

from datetime import datetime
from functools import lru_cache

from croniter import CroniterBadDateError, CroniterError, croniter

from tickwork.errors import ScheduleError

MACROS = {
    "@yearly": "0 0 0 1 1 *",
    "@annually": "0 0 0 1 1 *",
    "@monthly": "0 0 0 1 * *",
    "@weekly": "0 0 0 * * 0",
    "@daily": "0 0 0 * * *",
    "@midnight": "0 0 0 * * *",
    "@hourly": "0 0 * * * *",
}
# 28 years is a full weekday/leap-year cycle inside 1901-2099: no match in it means no match ever.
NEVER_FIRES_YEARS = 28
_PROBE_FROM = datetime(2000, 1, 1)


class CronExpr:
    """A validated 6-field (seconds first) cron expression; matching happens on naive wall-clock times."""

    __slots__ = ("canonical", "periodic_hour", "_iter")

    def __init__(self, canonical: str) -> None:
        self.canonical = canonical
        hour = canonical.split()[2]
        # A `*` or stepped hour asks for a period, not for particular hours: DST keeps real elapsed time.
        self.periodic_hour = "*" in hour or "/" in hour
        self._iter = croniter(
            canonical, _PROBE_FROM, second_at_beginning=True, max_years_between_matches=NEVER_FIRES_YEARS
        )

    def next_wall(self, after: datetime) -> datetime | None:
        """First matching naive wall time strictly after `after` (naive), None if there is none."""
        try:
            result: datetime = self._iter.get_next(datetime, start_time=after.replace(microsecond=0))
        except CroniterBadDateError:
            return None
        return result


def normalize(expression: str) -> str:
    """Six fields, seconds first, single-spaced and upper-case; macros expanded."""
    text = " ".join(expression.split())
    macro = MACROS.get(text.lower())
    if macro is not None:
        return macro
    fields = text.split(" ")
    if len(fields) == 5:
        fields.insert(0, "0")
    elif len(fields) != 6:
        raise ScheduleError(
            f"cron expression needs 5 fields (minute hour day-of-month month day-of-week) or 6 "
            f"(second first), got {len(fields)}"
        )
    return " ".join(field.upper() for field in fields)


@lru_cache(maxsize=4096)
def parse_cron(expression: str) -> CronExpr:
    canonical = normalize(expression)
    try:
        expr = CronExpr(canonical)
    except CroniterError as exc:
        raise ScheduleError(f"invalid cron expression: {exc}") from exc
    if expr.next_wall(_PROBE_FROM) is None:
        raise ScheduleError("schedule never fires")
    return expr
