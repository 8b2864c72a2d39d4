"""Property tests: agreement with cronsim, an independent DST oracle, monotonicity and windows."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import cache
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tickwork.errors import ScheduleError
from tickwork.schedule.engine import Schedule, parse_schedule

ZONES = ("America/New_York", "Europe/London", "Australia/Sydney", "Australia/Lord_Howe", "America/Santiago",
         "Europe/Dublin", "America/St_Johns")
FAST = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _ints(low: int, high: int) -> st.SearchStrategy[str]:
    return st.integers(low, high).map(str)


def _field(low: int, high: int) -> st.SearchStrategy[str]:
    value = st.integers(low, high)
    ranged = st.tuples(value, value).map(sorted).map(lambda p: f"{p[0]}-{p[1]}")
    # cronsim reads a one-value range with a step ("5-5/2") as "5/2"; Vixie and Tickwork read it as 5.
    proper = ranged.filter(lambda r: r.split("-")[0] != r.split("-")[1])
    stepped = st.tuples(proper, st.integers(1, high - low + 1)).map(lambda p: f"{p[0]}/{p[1]}")
    started = st.tuples(value, st.integers(1, high - low + 1)).map(lambda p: f"{p[0]}/{p[1]}")
    star_step = st.integers(1, high - low + 1).map(lambda k: f"*/{k}")
    listed = st.lists(value, min_size=2, max_size=4, unique=True).map(lambda v: ",".join(map(str, v)))
    return st.one_of(st.just("*"), _ints(low, high), ranged, stepped, started, star_step, listed)


_DOM = st.one_of(st.just("*"), st.just("*"), _field(1, 31), st.sampled_from(["L", "LW", "1,L", "15,LW"]))
_DOW = st.one_of(
    st.just("*"),
    st.just("*"),
    _field(0, 6),
    st.sampled_from(["MON-FRI", "SAT,SUN", "SUN"]),
    st.tuples(st.integers(0, 6), st.integers(1, 5)).map(lambda p: f"{p[0]}#{p[1]}"),
    st.integers(0, 6).map(lambda d: f"{d}L"),
)
CRON = st.tuples(
    _field(0, 59), _field(0, 59), _field(0, 23), _DOM, st.one_of(st.just("*"), _field(1, 12)), _DOW
).map(" ".join)


def _parse_or_none(expression: str, zone: str = "UTC") -> Schedule | None:
    try:
        return parse_schedule(expression, zone)
    except ScheduleError:
        return None


def _cronsim_walls(expression: str, after: datetime, count: int) -> list[datetime] | None:
    try:
        walls = CronSim(expression, after)
        return [next(walls) for _ in range(count)]
    except (CronSimError, StopIteration):
        return None


@FAST
@given(CRON, st.datetimes(datetime(2000, 1, 1), datetime(2090, 1, 1)))
def test_agrees_with_cronsim_in_utc(expression: str, start: datetime) -> None:
    schedule = _parse_or_none(expression)
    expected = _cronsim_walls(expression, start, 5)
    if schedule is None or expected is None:
        assert schedule is None or expected is None or _cronsim_walls(expression, start, 1) is None
        return
    got = schedule.preview(start.replace(tzinfo=UTC), 5)
    assert [run.replace(tzinfo=None) for run in got] == expected


@FAST
@given(CRON, st.sampled_from(ZONES), st.datetimes(datetime(2026, 6, 5), datetime(2026, 7, 31)))
def test_agrees_with_cronsim_away_from_transitions(expression: str, zone: str, start: datetime) -> None:
    schedule = _parse_or_none(expression, zone)
    if schedule is None:
        return
    tz = ZoneInfo(zone)
    horizon = datetime(2026, 8, 31)  # no zone in ZONES changes offset between June and the end of August
    walls = _cronsim_walls(expression, start, 5) or []
    expected = [wall.replace(tzinfo=tz).astimezone(UTC) for wall in walls if wall < horizon]
    assert schedule.preview(start.replace(tzinfo=tz), len(expected)) == expected


# --- An independent oracle for the DST rules, run on every 2026 transition of the zones above.


@cache
def _transitions(zone: str) -> tuple[datetime, ...]:
    """UTC instants where `zone` changes offset in 2026, found by brute force (hourly, then by minute)."""
    tz, found = ZoneInfo(zone), []
    hour = datetime(2026, 1, 1, tzinfo=UTC)
    while hour.year == 2026:
        after = hour + timedelta(hours=1)
        if hour.astimezone(tz).utcoffset() != after.astimezone(tz).utcoffset():
            minute = hour
            while minute.astimezone(tz).utcoffset() == hour.astimezone(tz).utcoffset():
                minute += timedelta(minutes=1)
            found.append(minute)
        hour = after
    return tuple(found)


def _exists(wall: datetime, tz: ZoneInfo) -> bool:
    return wall.replace(tzinfo=tz).astimezone(UTC).astimezone(tz).replace(tzinfo=None) == wall


def _gap_end(wall: datetime, tz: ZoneInfo) -> datetime:
    while not _exists(wall, tz):
        wall = (wall + timedelta(minutes=1)).replace(second=0)
    return wall.replace(tzinfo=tz).astimezone(UTC)


def _oracle(expression: str, tz: ZoneInfo, low: datetime, high: datetime) -> list[datetime]:
    """The documented rules applied wall time by wall time, with cronsim choosing the wall times."""
    hour = expression.split()[2]
    periodic = hour.startswith("*") or "/" in hour
    walls = CronSim(expression, (low.astimezone(tz) - timedelta(hours=3)).replace(tzinfo=None))
    instants: set[datetime] = set()
    for wall in walls:
        if wall.replace(tzinfo=tz) > high + timedelta(hours=3):
            break
        if not _exists(wall, tz):
            instants.update(() if periodic else (_gap_end(wall, tz),))
            continue
        first = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
        second = wall.replace(tzinfo=tz, fold=1).astimezone(UTC)
        instants.update((first, second) if periodic else (first,))
    return sorted(i for i in instants if low < i <= high)


_SPARSE_SECONDS = st.one_of(st.just("0"), _ints(0, 59), st.sampled_from(["0,30", "*/15", "*/20", "10-50/20"]))
_DST_CRON = st.tuples(_SPARSE_SECONDS, _field(0, 59), st.one_of(_field(0, 23), _field(0, 4))).map(
    lambda f: f"{f[0]} {f[1]} {f[2]} * * *"
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_DST_CRON, st.sampled_from(ZONES), st.integers(0, 1), st.integers(-10_800, 7_200))
def test_dst_rules_match_the_oracle(expression: str, zone: str, which: int, shift: int) -> None:
    schedule = _parse_or_none(expression, zone)
    if schedule is None:
        return
    tz = ZoneInfo(zone)
    low = _transitions(zone)[which] + timedelta(seconds=shift)
    high = low + timedelta(hours=4)
    expected = _oracle(expression, tz, low, high)
    got = [run for run in schedule.preview(low, len(expected) + 1) if run <= high]
    assert got == expected


# --- General properties: strictly increasing, never in the past, consistent from any starting point.


@FAST
@given(CRON, st.sampled_from(ZONES), st.integers(0, 1), st.integers(-86_400, 86_400), st.data())
def test_runs_strictly_increase_and_every_start_agrees(
    expression: str, zone: str, which: int, shift: int, data: st.DataObject
) -> None:
    schedule = _parse_or_none(expression, zone)
    if schedule is None:
        return
    start = _transitions(zone)[which] + timedelta(seconds=shift)
    runs = schedule.preview(start, 20)
    assert all(a < b for a, b in zip([start, *runs], runs))
    if len(runs) > 1:
        index = data.draw(st.integers(0, len(runs) - 2))
        between = runs[index] + (runs[index + 1] - runs[index]) * data.draw(st.floats(0, 0.999))
        assert schedule.next_after(between) == runs[index + 1]
        assert schedule.next_after_ms(int(between.timestamp() * 1000)) == int(runs[index + 1].timestamp() * 1000)


@FAST
@given(CRON, st.sampled_from(ZONES), st.integers(0, 1), st.integers(-86_400, 86_400))
def test_every_run_matches_the_expression_in_its_zone(expression: str, zone: str, which: int, shift: int) -> None:
    schedule = _parse_or_none(expression, zone)
    if schedule is None:
        return
    tz = ZoneInfo(zone)
    for run in schedule.preview(_transitions(zone)[which] + timedelta(seconds=shift), 10):
        wall = run.astimezone(tz).replace(tzinfo=None)
        matches = next(CronSim(expression, wall - timedelta(seconds=1))) == wall
        gap_end = run.astimezone(tz).utcoffset() != (run - timedelta(seconds=1)).astimezone(tz).utcoffset()
        assert matches or gap_end


# --- Windows and rates.


@FAST
@given(
    st.one_of(CRON, st.sampled_from(["rate(7 seconds)", "rate(5 minutes)", "rate(1 hour)", "rate(2 days)"])),
    st.datetimes(datetime(2026, 1, 1), datetime(2026, 12, 1), timezones=st.just(UTC)),
    st.integers(1, 40 * 86_400),
    st.integers(-86_400, 86_400),
)
def test_nothing_runs_outside_start_and_end(expression: str, start: datetime, length: int, before: int) -> None:
    end = start + timedelta(seconds=length)
    try:
        schedule = parse_schedule(expression, "Europe/London", start_at=start, end_at=end)
    except ScheduleError:
        return
    runs = schedule.preview(start + timedelta(seconds=before), 50)
    assert all(start <= run < end for run in runs)
    if len(runs) < 50 and runs:
        assert schedule.next_after(runs[-1]) is None


@FAST
@given(
    st.integers(1, 100_000),
    st.datetimes(datetime(2020, 1, 1), datetime(2030, 1, 1), timezones=st.just(UTC)),
    st.datetimes(datetime(2020, 1, 1), datetime(2030, 1, 1), timezones=st.just(UTC)),
)
def test_rate_stays_on_the_anchor_grid(seconds: int, anchor: datetime, after: datetime) -> None:
    anchor = anchor.replace(microsecond=anchor.microsecond // 1000 * 1000)
    schedule = parse_schedule(f"rate({seconds} seconds)", "America/New_York", anchor=anchor)
    first, second = schedule.preview(after, 2)
    assert after < first <= after + timedelta(seconds=seconds)
    assert second - first == timedelta(seconds=seconds)
    assert (first - anchor) % timedelta(seconds=seconds) == timedelta(0)
