"""What a calendar may hold and what expanding it may cost: the numbers a PUT is refused past (400 naming
`dates.N` or `ical`), and past which a calendar stored before these bounds (by an older release) is read
with that part left out and reported (tickwork.calendars.rules)."""
from __future__ import annotations

from datetime import date

# Every date a calendar holds, covers or recurs to lies in [FIRST_DATE, LAST_DATE]. From the first instant
# Tickwork schedules (tickwork.timeutil.EARLIEST); to a year past any holiday feed (they reach a few years
# ahead) and far below 9999, where date arithmetic overflows. A job's slot past LAST_DATE excludes nothing.
FIRST_DATE = date(1970, 1, 1)
LAST_DATE = date(2200, 12, 31)
# A holiday feed holds a few hundred events; past this a calendar is a data set, not a list of days off.
MAX_EVENTS = 2000
# An event covering more than a year is not a day off.
MAX_EVENT_DAYS = 366
# A holiday recurs by one rule, a few by two (RFC 5545 lets an event have several RRULEs).
MAX_RULES_PER_EVENT = 10
# RRULEs in one calendar, all events together: each is walked for every year a schedule asks about.
MAX_RULES = 100
# Steps (periods dateutil examines: a day of a DAILY rule, a week, a month, a year) that expanding one year
# of one calendar may take, its rules' costs (tickwork.calendars.recurrence.Rule.cost) together: a holiday's
# yearly rule costs 1 to 2, a weekly rule 54, a daily one 366 to 731. A year's step of each frequency costs
# from 3 us (daily) to 70 us (yearly, BYWEEKNO): at most about 15 ms of CPU a calendar-year, whatever the
# rules (bench/bench_calendars.py), where the poller's tick has a second for every tenant's jobs.
EXPANSION_STEPS = 1000
# Steps one calendar may take, all its rules with COUNT together, to find their last dates when it is written
# (COUNT=1000 of a daily rule: 1,000 steps); such a rule is kept as UNTIL that date, so it walks like the others.
COUNT_STEPS = 20_000
# Years an answer of the API (a preview, a calendar's `upcoming`) expands recurring events for: the year it
# starts in, the year before, and up to HORIZON_YEARS - 1 after it. Beyond, only explicit dates, one-off
# events and RDATEs count. The poller needs no horizon: it asks only about the dates of due slots.
HORIZON_YEARS = 5
RANGE_TEXT = f"{FIRST_DATE.isoformat()}..{LAST_DATE.isoformat()}"


def in_range(day: date) -> bool:
    return FIRST_DATE <= day <= LAST_DATE
