"""H (a per-job value from the job id) and spread_seconds (a per-job offset): derivation, stability, range,
distribution, agreement with croniter's hash_id, validation, and every slot shifted."""
from __future__ import annotations

import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from croniter import croniter

from tickwork.errors import ScheduleError
from tickwork.schedule import hashing
from tickwork.schedule.engine import from_spec, min_gap_seconds, parse_schedule

JOB = "6f1c1f5e-4a8e-4d07-9a3b-2a0d1b1f5c11"
START = datetime(2026, 3, 1, tzinfo=UTC)
# 1,000 job ids, the same on every run: uuid5 of a fixed namespace.
JOB_IDS = [str(uuid.uuid5(uuid.NAMESPACE_URL, f"tickwork-job-{i}")) for i in range(1000)]


def resolved(expression: str, key: str = JOB) -> str:
    return parse_schedule(expression, "UTC", hash_key=key)._rule.canonical


# ---------------------------------------------------------------- H

def test_h_is_kept_in_the_canonical_form_and_resolved_for_the_job() -> None:
    schedule = parse_schedule("h * * * *", "UTC", hash_key=JOB)
    assert schedule.canonical == "0 H * * * *"
    minute = int(resolved("H * * * *").split(" ")[1])
    assert schedule.next_after(START) == START + timedelta(minutes=minute)
    assert schedule.describe() == f"every hour at :{minute:02d}"


def test_h_is_stable_for_a_job_and_differs_between_jobs() -> None:
    assert {resolved("H H * * *") for _ in range(3)} == {resolved("H H * * *")}
    assert len({resolved("H H * * *", key) for key in JOB_IDS[:50]}) > 40


@pytest.mark.parametrize(("expression", "field", "low", "high"), [
    ("H * * * * *", 0, 0, 59), ("* H * * * *", 1, 0, 59), ("* * H * * *", 2, 0, 23),
    ("* * * H * *", 3, 1, 28), ("* * * * H *", 4, 1, 12), ("* * * * * H", 5, 0, 6),
    ("H(10-20) * * * *", 1, 10, 20), ("* * H(1-31) * *", 3, 1, 31),
])
def test_h_reaches_every_value_of_its_range_and_no_other(expression: str, field: int, low: int, high: int) -> None:
    values = Counter(int(resolved(expression, key).split(" ")[field]) for key in JOB_IDS)
    assert set(values) == set(range(low, high + 1))
    # Roughly uniform: no value more than twice or less than a third of its fair share of 1,000 jobs.
    fair = len(JOB_IDS) / (high - low + 1)
    assert fair / 3 < min(values.values()) and max(values.values()) < fair * 2


def test_h_in_day_of_month_stays_within_28_so_the_job_runs_every_month() -> None:
    for key in JOB_IDS[:200]:
        runs = parse_schedule("0 0 H * *", "UTC", hash_key=key).preview(datetime(2025, 12, 31, tzinfo=UTC), 12)
        assert [run.month for run in runs] == list(range(1, 13))


@pytest.mark.parametrize(("expression", "count"), [("H/15 * * * *", 4), ("* H/6 * * *", 4), ("H(0-29)/10 * * * *", 3)])
def test_h_with_a_step_keeps_the_step_from_a_hashed_start(expression: str, count: int) -> None:
    field = 1 if expression.startswith("H") else 2
    starts = set()
    for key in JOB_IDS[:300]:
        values = [int(v) for v in _expanded(resolved(expression, key).split(" ")[field])]
        assert len(values) == count
        starts.add(values[0])
    step = int(expression.split("/")[1].split(" ")[0])
    assert starts == set(range(step))


def _expanded(field: str) -> list[int]:
    base, _, step = field.partition("/")
    first, _, last = base.partition("-")
    return list(range(int(first), int(last or first) + 1, int(step or 1)))


# croniter numbers the fields minute, hour, dom, month, dow, second (seconds last in its 6-field form).
_CRONITER_CASES = ["H * * * *", "H H * * *", "H H * H *", "H H * * H", "H H/3 * * *", "H/15 * * * *",
                   "H(30-59)/10 H * * *", "H H H(3-5) * *", "H(0-29) H(8-17) * * H(1-5)", "* * * * * H",
                   "H/7 * * * *", "H(50-52)/10 * * * *", "* * H/2 * *"]


@pytest.mark.parametrize("expression", _CRONITER_CASES)
def test_h_gives_croniters_values_for_the_same_hash_id(expression: str) -> None:
    croniter_fields = expression.split(" ")
    ours = croniter_fields[5:] + croniter_fields[:5] if len(croniter_fields) == 6 else croniter_fields
    after = datetime(2026, 5, 17, 13, 7, 3)
    for key in JOB_IDS[:100]:
        theirs = croniter(expression, after, hash_id=key)
        expected = [theirs.get_next(datetime).replace(tzinfo=UTC) for _ in range(5)]
        assert parse_schedule(" ".join(ours), "UTC", hash_key=key).preview(after.replace(tzinfo=UTC), 5) == expected


def test_h_in_day_of_month_differs_from_croniter_only_in_its_range() -> None:
    # croniter draws a bare H in day-of-month from 1-31; Tickwork from 1-28 (Jenkins), with the same hash.
    for key in JOB_IDS[:100]:
        crc = hashing.zlib.crc32(key.encode())
        assert resolved("0 0 H * *", key).split(" ")[3] == str((crc >> 2) % 28 + 1)


@pytest.mark.parametrize(("expression", "message"), [
    ("H(5-2) * * * *", "minute field: the range of H(a-b) must go from a lower to a higher value"),
    ("H(5-5) * * * *", "minute field: the range of H(a-b) must go from a lower to a higher value"),
    ("H/0 * * * *", "minute field: a step must be at least 1"),
    ("5,H * * * *", "minute field: H stands alone in its field: H, H/n, H(a-b) or H(a-b)/n"),
    ("H,5 * * * *", "minute field: H stands alone in its field: H, H/n, H(a-b) or H(a-b)/n"),
    ("* * * * H#2", "day-of-week field: H stands alone in its field: H, H/n, H(a-b) or H(a-b)/n"),
    ("H(0-99) * * * *", "minute field: a value is out of range 0-59"),
    ("* * * * H(0-8)", "day-of-week field: a value is out of range 0-7"),
    ("* H(MON-FRI) * * *", "hour field: H(a-b) needs two numbers, e.g. H(0-29)"),
    ("H/x * * * *", "minute field: a step must be a whole number"),
])
def test_bad_h_forms_are_400s_naming_the_field_and_the_reason(expression: str, message: str) -> None:
    with pytest.raises(ScheduleError) as raised:
        parse_schedule(expression, "UTC", hash_key=JOB)
    assert (raised.value.field, raised.value.message) == ("schedule", message)


def test_h_needs_a_key_and_thursday_is_not_an_h() -> None:
    with pytest.raises(ScheduleError, match="need the job id"):
        parse_schedule("H * * * *", "UTC")
    assert parse_schedule("0 9 * * THU", "UTC").canonical == "0 0 9 * * THU"
    assert not hashing.is_hashed("0 0 9 * * THU") and hashing.is_hashed("0 0 9 * * H")


def test_h_survives_the_spec_round_trip_and_plain_specs_are_unchanged() -> None:
    schedule = parse_schedule("H H * * *", "Europe/London", hash_key=JOB)
    rebuilt = from_spec(schedule.spec())
    assert rebuilt.canonical == "0 H H * * *"
    assert rebuilt.preview(START, 3) == schedule.preview(START, 3)
    assert "hash_key" not in parse_schedule("0 * * * *", "UTC", hash_key=JOB).spec()


def test_h_interval_is_that_of_the_resolved_fields() -> None:
    # H/7 minutes: 7-apart within the hour, and a shorter gap across it that depends on the start.
    for key in JOB_IDS[:50]:
        first = int(resolved("H/7 * * * *", key).split(" ")[1].split("-")[0])
        last = first + (59 - first) // 7 * 7
        assert min_gap_seconds(parse_schedule("H/7 * * * *", "UTC", hash_key=key)) == 60 * min(7, 60 - last + first)


# ---------------------------------------------------------------- spread

def test_spread_offset_derivation_is_the_documented_one() -> None:
    digest = hashing.hashlib.sha256(JOB.encode()).digest()
    assert hashing.spread_offset_seconds(JOB, 600) == int.from_bytes(digest[:8], "big") % 601
    assert hashing.spread_offset_seconds(JOB, 0) == 0


def test_spread_offsets_are_within_range_and_roughly_uniform_over_1000_jobs() -> None:
    offsets = [hashing.spread_offset_seconds(key, 59) for key in JOB_IDS]
    counts = Counter(offsets)
    assert set(counts) == set(range(60))
    assert 1000 / 60 / 3 < min(counts.values()) and max(counts.values()) < 1000 / 60 * 2


def test_every_slot_is_shifted_by_the_jobs_offset() -> None:
    plain = parse_schedule("0 * * * *", "America/New_York").preview(datetime(2026, 3, 7, 23, tzinfo=UTC), 200)
    spread = parse_schedule("0 * * * *", "America/New_York", hash_key=JOB, spread_seconds=3600)
    offset = timedelta(seconds=hashing.spread_offset_seconds(JOB, 3600))
    assert spread.offset_seconds == offset.total_seconds()
    assert spread.preview(datetime(2026, 3, 7, 23, tzinfo=UTC) + offset, 200) == [t + offset for t in plain]
    assert from_spec(spread.spec()).preview(START, 5) == spread.preview(START, 5)


def test_a_shifted_schedule_answers_strictly_after_any_instant() -> None:
    spread = parse_schedule("*/5 * * * * *", "UTC", hash_key=JOB, spread_seconds=5)
    offset = spread.offset_seconds
    for second in range(20):
        t = START + timedelta(seconds=second)
        found = spread.next_after(t)
        assert found is not None and t < found <= t + timedelta(seconds=5)
        assert (found - START).total_seconds() % 5 == offset % 5


def test_spread_keeps_runs_inside_the_window() -> None:
    end = START + timedelta(hours=3)
    spread = parse_schedule("0 * * * *", "UTC", start_at=START, end_at=end, hash_key=JOB, spread_seconds=3600)
    runs = spread.preview(START - timedelta(days=1), 10)
    assert runs and all(START <= run < end for run in runs)


def test_spread_is_stable_and_the_same_for_the_same_job() -> None:
    a = parse_schedule("0 * * * *", "UTC", hash_key=JOB, spread_seconds=900).offset_seconds
    b = parse_schedule("30 */2 * * *", "Asia/Tokyo", hash_key=JOB, spread_seconds=900).offset_seconds
    assert a == b == hashing.spread_offset_seconds(JOB, 900)


@pytest.mark.parametrize(("expression", "spread", "message"), [
    ("*/5 * * * *", 301, "must be at most the schedule's shortest interval (300 s)"),
    ("rate(30 seconds)", 31, "must be at most the schedule's shortest interval (30 s)"),
    ("0 * * * *", 3601, "must be 0 to 3600 seconds"),
    ("0 * * * *", -1, "must be 0 to 3600 seconds"),
])
def test_spread_beyond_the_shortest_interval_is_a_400_naming_spread_seconds(
    expression: str, spread: int, message: str,
) -> None:
    with pytest.raises(ScheduleError) as raised:
        parse_schedule(expression, "UTC", hash_key=JOB, spread_seconds=spread)
    assert (raised.value.field, raised.value.message) == ("spread_seconds", message)


def test_spread_up_to_the_interval_and_on_a_one_off_is_accepted() -> None:
    assert parse_schedule("*/5 * * * *", "UTC", hash_key=JOB, spread_seconds=300).offset_seconds <= 300
    at = parse_schedule("at(2030-01-01T00:00:00)", "UTC", hash_key=JOB, spread_seconds=3600)
    assert at.next_after(START) == datetime(2030, 1, 1, tzinfo=UTC) + timedelta(seconds=at.offset_seconds)
