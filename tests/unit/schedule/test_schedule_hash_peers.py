"""croniter's own H cases (croniter 7.0, tests/test_croniter_hash.py), run against Tickwork.

Written as croniter writes them, with two translations: croniter's 6-field form puts seconds last,
Tickwork's first; croniter's `hash_id` is Tickwork's `hash_key`. Where Tickwork differs on purpose
the case says so and pins Tickwork's answer (docs/schedules.md, "H: a per-job value"):
- a bare H or H/n in day-of-month draws from 1-28, not 1-31 (Jenkins' rule: the job runs every month);
- `@hourly` and the other macros keep their fixed times (croniter hashes them when given a hash_id);
- there is no year field, and the key is text (the job id), not bytes.
"""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tickwork.errors import ScheduleError
from tickwork.schedule import hashing
from tickwork.schedule.cron import FIELD_NAMES, _union
from tickwork.schedule.engine import parse_schedule

EPOCH = datetime(2020, 1, 1, tzinfo=UTC)
HASH_ID = "hello"
# croniter's field order (minute hour dom month dow second) to Tickwork's (second first).
_OURS = (1, 2, 3, 4, 5, 0)


def tickwork_text(croniter_expression: str) -> str:
    fields = croniter_expression.split(" ")
    return " ".join([fields[5], *fields[:5]]) if len(fields) == 6 else croniter_expression


def first_two(croniter_expression: str, hash_id: str = HASH_ID, epoch: datetime = EPOCH) -> list[datetime]:
    return parse_schedule(tickwork_text(croniter_expression), "UTC", hash_key=hash_id).preview(epoch, 2)


def expanded(croniter_expression: str, croniter_field: int, hash_id: str) -> list[int]:
    """croniter.expand(...)[0][field] for Tickwork: the values the resolved field stands for."""
    index = _OURS[croniter_field]
    text = hashing.resolve(parse_schedule(tickwork_text(croniter_expression), "UTC", hash_key=hash_id).canonical,
                           hash_id).split(" ")[index]
    return sorted(_union(index, text))


@pytest.mark.parametrize(("expression", "first", "delta"), [
    ("H * * * *", datetime(2020, 1, 1, 0, 10), timedelta(hours=1)),  # test_hash_hourly
    ("H H * * *", datetime(2020, 1, 1, 11, 10), timedelta(days=1)),  # test_hash_daily
    ("H H * * H", datetime(2020, 1, 3, 11, 10), timedelta(weeks=1)),  # test_hash_weekly (dow range 0-6)
    ("H H H H *", datetime(2020, 9, 22, 11, 10), timedelta(days=365)),  # test_hash_yearly: croniter 09-01 (dom 1-31)
    ("H H H * *", datetime(2020, 1, 22, 11, 10), timedelta(days=31)),  # test_hash_monthly: croniter 01-01 (dom 1-31)
    ("H H * * * H", datetime(2020, 1, 1, 11, 10, 32), timedelta(days=1)),  # test_hash_second
    ("H H H(3-5) * *", datetime(2020, 1, 5, 11, 10), timedelta(days=31)),  # test_hash_range
    ("H H/3 * * *", datetime(2020, 1, 1, 2, 10), timedelta(hours=3)),  # test_hash_division
    ("H(30-59)/10 H * * *", datetime(2020, 1, 1, 11, 30), timedelta(minutes=10)),  # test_hash_range_division
])
def test_croniter_iteration_cases(expression: str, first: datetime, delta: timedelta) -> None:
    start = first.replace(tzinfo=UTC)
    assert first_two(expression) == [start, start + delta]


def test_hash_id_change() -> None:
    assert first_two("H H * * *", "different id")[0] == datetime(2020, 1, 1, 0, 24, tzinfo=UTC)


def test_hash_epoch_change() -> None:
    assert first_two("H H * * *", epoch=datetime(2011, 11, 11, 11, 11, tzinfo=UTC))[0] == datetime(
        2011, 11, 12, 11, 10, tzinfo=UTC)


@pytest.mark.parametrize(("expression", "hash_id", "values"), [
    ("H/15 * * * *", "2", [7, 22, 37, 52]),  # test_hash_division_unchanged_when_divisor_fits
    ("H(30-59)/10 * * * *", "hello", [30, 40, 50]),
    ("H/60 * * * *", "79", [59]),  # test_hash_division_offset_at_field_max
    ("H(50-59)/10 * * * *", "0", [59]),  # test_hash_range_division_offset_at_range_end
    ("H(50-52)/10 * * * *", "0", [52]),  # test_hash_divisor_wider_than_range
    ("H(50-52)/10 * * * *", "hello", [51]),
    ("H/100 * * * *", "79", [59]),  # test_hash_divisor_wider_than_field
])
def test_croniter_expansion_cases(expression: str, hash_id: str, values: list[int]) -> None:
    assert expanded(expression, 0, hash_id) == values


@pytest.mark.parametrize(("expression", "field", "low", "high"), [  # test_hash_division_invariants
    ("H/60 * * * *", 0, 0, 59), ("* H/24 * * *", 1, 0, 23),
    ("* * H/31 * *", 2, 1, 28),  # croniter: 1-31
    ("* * * H/12 *", 3, 1, 12), ("* * * * H/7", 4, 0, 6), ("* * * * * H/60", 5, 0, 59),
])
def test_a_divisor_as_wide_as_the_field_gives_one_value_reaching_them_all(
    expression: str, field: int, low: int, high: int,
) -> None:
    seen = set()
    for i in range(1200):
        got = expanded(expression, field, str(i))
        assert len(got) == 1 and low <= got[0] <= high
        seen.add(got[0])
    assert seen == set(range(low, high + 1))


@pytest.mark.parametrize(("begin", "end", "divisor"), [(50, 52, 10), (5, 6, 30), (1, 3, 60), (10, 11, 2), (0, 1, 59)])
def test_hash_range_division_never_escapes_its_range(begin: int, end: int, divisor: int) -> None:
    seen = set()
    for i in range(300):
        values = expanded(f"H({begin}-{end})/{divisor} * * * *", 0, str(i))
        assert all(begin <= v <= end for v in values)
        seen.update(values)
    assert seen == set(range(begin, end + 1))


@pytest.mark.parametrize("expression", [  # test_hash_range_outside_field, test_hash_invalid_range, test_invalid_divisor
    "H(0-99) * * * *", "* H(20-30) * * *", "* * H(0-5) * *", "* * H(0-20)/5 * *", "* * * H(0-12) *",
    "* * * * H(0-8)", "* * * * * H(30-60)", "H(11-10) H * * *", "* * H/0 * *",
])
def test_croniter_rejects_and_so_does_tickwork(expression: str) -> None:
    for i in range(20):
        with pytest.raises(ScheduleError) as raised:
            parse_schedule(tickwork_text(expression), "UTC", hash_key=str(i))
        assert raised.value.message.split(" field:")[0] in FIELD_NAMES


def test_seven_is_sunday_inside_a_hashed_range() -> None:
    for i in range(100):
        assert expanded("* * * * H(0-7)", 4, str(i))[0] in range(7)


@pytest.mark.parametrize(("expression", "field", "size", "total"), [  # the CroniterHashExpander* suites
    ("H * * * *", 0, {1}, 60), ("H/2 * * * *", 0, {30}, 60), ("H/3 * * * *", 0, {20}, 60),
    ("H/15 * * * *", 0, {4}, 60), ("H(0-59) * * * *", 0, {1}, 60),
    ("H H * * *", 1, {1}, 24), ("H H/2 * * *", 1, {12}, 24), ("H H/4 * * *", 1, {6}, 24),
    ("H H/8 * * *", 1, {3}, 24), ("H H/10 * * *", 1, {2, 3}, 24), ("H H/12 * * *", 1, {2}, 24),
    ("* H(0-23) * * *", 1, {1}, 24),
    ("H H H * *", 2, {1}, 28), ("0 0 H/2 * *", 2, {14}, 28), ("H H H/5 * *", 2, {5, 6}, 28),  # croniter: 31 days
    ("H H H/12 * *", 2, {2, 3}, 28), ("* * H(1-31) * *", 2, {1}, 31),
    ("H H * H *", 3, {1}, 12), ("H H * H/2 *", 3, {6}, 12), ("H H * H/3 *", 3, {4}, 12),
    ("H H * H/5 *", 3, {2, 3}, 12), ("* * * H(1-12) *", 3, {1}, 12),
    ("H H * * H", 4, {1}, 7), ("H H * * H/2", 4, {3, 4}, 7), ("H H * * H/4", 4, {1, 2}, 7),
    ("* * * * H(0-6)", 4, {1}, 7),
])
def test_croniter_expander_distribution(expression: str, field: int, size: set[int], total: int) -> None:
    seen: set[int] = set()
    for i in range(350):
        values = expanded(expression, field, f"job-{i}")
        assert len(values) in size
        seen.update(values)
    assert len(seen) == total


def test_macros_keep_their_fixed_times() -> None:
    # croniter, given a hash_id, reads @hourly as "H * * * *": Tickwork's @hourly stays on the hour.
    assert first_two("@hourly")[0] == datetime(2020, 1, 1, 1, tzinfo=UTC)
