"""Generated rules against dateutil itself: the static check that refuses a rule as never matching is sound (it
never refuses one dateutil gives a date for); a rule walked from a start moved near the year asked gives the
dates dateutil's full walk gives, within its cost (Rule.cost) in steps; a COUNT rule kept as UNTIL its last
date gives the same dates."""
from __future__ import annotations

from datetime import date, datetime, timedelta

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from dateutil import rrule

from tickwork.calendars.recurrence import FREQUENCIES, WEEKDAYS, Rule
from tickwork.calendars.rules import Event
from tickwork.calendars.walk import StepBudget

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _signed(values: st.SearchStrategy[int]) -> st.SearchStrategy[int]:
    return st.tuples(values, st.booleans()).map(lambda p: -p[0] if p[1] else p[0])


# Values near the edges of months, years and weeks, where a rule can or cannot match.
_MONTHDAY = _signed(st.one_of(st.integers(1, 31), st.sampled_from([28, 29, 30, 31])))
_YEARDAY = _signed(st.one_of(st.integers(1, 366), st.sampled_from([59, 60, 61, 90, 91, 181, 182, 365, 366])))
_WEEKNO = _signed(st.one_of(st.integers(1, 53), st.sampled_from([1, 2, 52, 53])))
_WEEKDAY = st.tuples(st.one_of(st.just(0), _signed(st.integers(1, 5)), _signed(st.integers(1, 53))),
                     st.sampled_from(WEEKDAYS)).map(lambda p: f"{p[0] or ''}{p[1]}")


def _listed(values: st.SearchStrategy[object], most: int) -> st.SearchStrategy[str]:
    return st.lists(values, min_size=1, max_size=most, unique=True).map(lambda v: ",".join(map(str, v)))


_PARTS = st.fixed_dictionaries({}, optional={
    "INTERVAL": st.integers(1, 4).map(str),
    "BYMONTH": _listed(st.integers(1, 12), 3),
    "BYMONTHDAY": _listed(_MONTHDAY, 3),
    "BYYEARDAY": _listed(_YEARDAY, 2),
    "BYWEEKNO": _listed(_WEEKNO, 2),
    "BYDAY": _listed(_WEEKDAY, 3),
    "BYSETPOS": _listed(_signed(st.one_of(st.integers(1, 8), st.integers(1, 366))), 2),
    "WKST": st.sampled_from(WEEKDAYS),
})
RULES = st.tuples(st.sampled_from(FREQUENCIES), _PARTS).map(
    lambda p: ";".join([f"FREQ={p[0]}", *(f"{k}={v}" for k, v in p[1].items())]))


def _midnight(day: date) -> datetime:
    return datetime.combine(day, datetime.min.time())


def _same_weekday_late(start: date) -> date:
    """`start`'s month, day and weekday in a year from 9940 on: dateutil's walk from there ends at 9999, past
    every kind of year (its first weekday, leap or not, after a leap year or not) twice."""
    return next(day for year in range(9940, 9970) if (start.month, start.day) != (2, 29) or year % 4 == 0
                if (day := date(year, start.month, start.day)).weekday() == start.weekday())


@FAST
@given(text=RULES, start=st.dates(date(1990, 1, 1), date(2030, 12, 31)))
def test_a_rule_refused_as_never_matching_gets_no_date_from_dateutil(text: str, start: date) -> None:
    reason = Rule.parse(text).problem(start)
    assume(reason is not None and ("never matches" in reason or "BYSETPOS" in reason))
    # Every date INTERVAL=n gives, INTERVAL=1 gives too.
    every = ";".join(part for part in text.split(";") if not part.startswith("INTERVAL="))
    late = _same_weekday_late(start)
    assert _dates_until_it_fails(rrule.rrulestr(every, dtstart=_midnight(late))) == [], (text, start)


def _dates_until_it_fails(rule: rrule.rrule) -> list[date]:
    """What dateutil gives before it ends, or raises: with a weekday's position past a month's end
    (FREQ=MONTHLY;BYDAY=20MO) it fails with an IndexError, having given nothing."""
    found: list[date] = []
    try:
        found.extend(moment.date() for moment in rule)
    except IndexError:
        pass
    return found


@FAST
@given(text=RULES, start=st.dates(date(9900, 1, 1), date(9930, 12, 31)), days=st.integers(1, 40),
       offset=st.integers(-2, 60))
def test_a_rule_walked_from_near_the_year_gives_what_a_full_walk_gives_within_its_cost(
    text: str, start: date, days: int, offset: int,
) -> None:
    """Far in the future only so that dateutil's full walk ends (at 9999) for a rule that matches rarely."""
    rule = Rule.parse(text)
    assume(rule.problem(start) is None)
    year = start.year + offset
    budget = StepBudget(10**9)
    found = Event(start, days, (text,)).dates_in(year, budget)
    full = rrule.rruleset()
    full.rdate(_midnight(start))
    full.rrule(rrule.rrulestr(text, dtstart=_midnight(start)))
    since, until = _midnight(date(year, 1, 1) - timedelta(days=days - 1)), _midnight(date(year, 12, 31))
    expected = {m.date() + timedelta(days=n) for m in full.between(since, until, inc=True) for n in range(days)}
    assert sorted(found) == sorted(d for d in expected if d.year == year), (text, start, days, year)
    assert budget.used <= rule.cost(days), (text, start, days, year)


_DENSE = st.tuples(st.sampled_from(FREQUENCIES), st.fixed_dictionaries({}, optional={
    "INTERVAL": st.integers(1, 3).map(str),
    "BYDAY": _listed(st.sampled_from(WEEKDAYS), 3),
    "BYMONTHDAY": _listed(st.integers(1, 28), 2),
}), st.integers(1, 40)).map(lambda p: ";".join([f"FREQ={p[0]}", *(f"{k}={v}" for k, v in p[1].items()), f"COUNT={p[2]}"]))


@FAST
@given(text=_DENSE, start=st.dates(date(1990, 1, 1), date(2030, 12, 31)))
def test_a_count_rule_kept_as_until_its_last_date_gives_the_same_dates(text: str, start: date) -> None:
    until = Rule.parse(text).without_count(start, StepBudget(10**6))
    assert until.count is None and until.until is not None
    assert Rule.parse(until.text) == until
    counted = [m.date() for m in rrule.rrulestr(text, dtstart=_midnight(start))]
    kept = [m.date() for m in rrule.rrulestr(until.text, dtstart=_midnight(start))]
    assert kept == counted and until.until == counted[-1], (text, start)
