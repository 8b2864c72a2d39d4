"""µs per next-fire computation: Tickwork cold and warm, beside plain croniter, in one run.

    .venv/bin/python -m bench.bench_schedule

cold: parse_schedule() with the parse caches emptied, then next_after_ms() - a job seen for the first time.
warm: from_spec() (a cache hit) then next_after_ms() - what the poller does for every claimed job.
croniter: a new croniter(...).get_next() per call, and get_next(start_time=...) on one reused instance.
Zone data (ZoneInfo and its transition table) stays warm in every column: it is per zone, not per job.
"""
from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Callable
from zoneinfo import ZoneInfo

from croniter import croniter

from tickwork.schedule import cron
from tickwork.schedule import engine as schedule
from tickwork.schedule.engine import from_spec, parse_schedule

CASES = (
    ("*/2 * * * * *", "UTC"),
    ("*/15 * * * * *", "Europe/Berlin"),
    ("0 30 9 * * MON-FRI", "Europe/London"),
    ("*/15 9-17 * * MON-FRI", "America/New_York"),
    ("0 0 L * *", "Australia/Sydney"),
    ("0 0 12 * * FRI#3", "Asia/Tokyo"),
    ("rate(30 seconds)", "UTC"),
    ("every weekday at 17:00", "Europe/Paris"),
)
BASE_MS = 1_780_000_000_000  # 2026-05-28: an ordinary day, no DST change nearby
STEP_MS = 7_919  # successive calls ask about different instants, as the poller does
WARM_CALLS = 20_000
COLD_CALLS = 2_000
REPEATS = 3
DUE_JOBS_PER_TICK = 10_000


def _best_us(call: Callable[[int], object], calls: int) -> float:
    """Best of REPEATS runs, in µs per call: the least disturbed measurement of the same work."""
    best = float("inf")
    for _ in range(REPEATS):
        started = time.perf_counter_ns()
        for index in range(calls):
            call(BASE_MS + index * STEP_MS)
        best = min(best, (time.perf_counter_ns() - started) / calls / 1000)
    return best


def _cold(expression: str, zone: str) -> Callable[[int], object]:
    def call(after_ms: int) -> object:
        cron.parse_cron.cache_clear()
        schedule._cron_rule.cache_clear()
        return parse_schedule(expression, zone).next_after_ms(after_ms)

    return call


def _warm(expression: str, zone: str) -> Callable[[int], object]:
    spec = parse_schedule(expression, zone).spec()
    return lambda after_ms: from_spec(spec).next_after_ms(after_ms)


def _croniter_calls(expression: str, zone: str) -> tuple[Callable[[int], object], Callable[[int], object]] | None:
    canonical = parse_schedule(expression, zone).canonical
    if not canonical[0].isdigit() and not canonical[0] == "*":
        return None
    tz = ZoneInfo(zone)
    reused = croniter(canonical, datetime.now(tz), second_at_beginning=True)

    def cold(after_ms: int) -> object:
        start = datetime.fromtimestamp(after_ms / 1000, tz)
        return croniter(canonical, start, second_at_beginning=True).get_next(float)

    def warm(after_ms: int) -> object:
        return reused.get_next(float, start_time=datetime.fromtimestamp(after_ms / 1000, tz))

    return cold, warm


def _row(expression: str, zone: str) -> tuple[str, str, float, float, str, str]:
    cold = _best_us(_cold(expression, zone), COLD_CALLS)
    warm = _best_us(_warm(expression, zone), WARM_CALLS)
    baseline = _croniter_calls(expression, zone)
    if baseline is None:
        return expression, zone, cold, warm, "n/a", "n/a"
    base_cold = _best_us(baseline[0], COLD_CALLS)
    base_warm = _best_us(baseline[1], COLD_CALLS)
    return expression, zone, cold, warm, f"{base_cold:.1f}", f"{base_warm:.1f}"


def main() -> None:
    print(f"next-fire computation, µs per call (best of {REPEATS}); {datetime.now(UTC):%Y-%m-%d %H:%M}Z")
    header = f"{'expression':26} {'zone':18} {'cold':>7} {'warm':>7} {'croniter new':>13} {'croniter reused':>16}"
    print(header)
    print("-" * len(header))
    warm_total = 0.0
    for expression, zone in CASES:
        expr, name, cold, warm, base_cold, base_warm = _row(expression, zone)
        warm_total += warm
        print(f"{expr:26} {name:18} {cold:7.1f} {warm:7.2f} {base_cold:>13} {base_warm:>16}")
    per_job = warm_total / len(CASES)
    print(f"\n{DUE_JOBS_PER_TICK:,} due jobs per tick at the mean warm cost: "
          f"{per_job * DUE_JOBS_PER_TICK / 1000:.1f} ms of schedule maths")


if __name__ == "__main__":
    main()
