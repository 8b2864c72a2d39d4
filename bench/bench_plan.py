"""µs per due job in the poller's plan (tickwork.dispatch.planning.plan_batch), for the schedule features that
make a job's plan its own: H and spread (a spec per job, so the parsed-schedule cache is not shared) and
calendars (looked up per job, and a slot on an excluded date moved), beside plain jobs sharing one spec, in
one run.

    .venv/bin/python -m bench.bench_plan

Each row plans DUE_JOBS entries at their slot, in chunks of CHUNK, each chunk's best of REPEATS passes. "warm": the schedule cache already
holds every spec (the poller's steady state); "cold": emptied before each pass (the first tick of a fresh
environment, or more H/spread jobs than SPEC_CACHE_SIZE cycling through it). The calendar cache's scan of a
tick's entries (CalendarCache.resolve with every calendar fresh, no query) is its own row.
"""
from __future__ import annotations

import time
from datetime import date, timedelta
from typing import Any, Callable

from tickwork.calendars.rules import Calendar
from tickwork.dispatch.calendars import CalendarCache
from tickwork.dispatch.planning import plan_batch
from tickwork.dueindex.entries import DueEntry
from tickwork.schedule import engine
from tickwork.schedule.engine import parse_schedule
from tickwork.schedule.specs import index_spec
from tickwork.timeutil import from_ms

DUE_JOBS = 10_000
# Timed in chunks, each the best of REPEATS passes: on a shared machine a pass of all 10,000 is often
# disturbed somewhere; the least disturbed pass of each chunk is the work itself.
CHUNK = 500
REPEATS = 5
BASE_MS = 1_780_000_000_000  # 2026-05-28T20:26:40Z: an ordinary day, no DST change nearby
TENANT = "tenant-1"
HOLIDAYS = "holidays"

Entries = tuple[list[DueEntry], dict[tuple[str, str], Calendar]]


def _entries(make: Callable[[int], tuple[Any, dict[str, Any] | None]], calendar: Calendar | None = None) -> Entries:
    entries = []
    for i in range(DUE_JOBS):
        schedule, extra = make(i)
        spec = index_spec(schedule, 1, tenant_id=TENANT)
        if extra:
            spec["c"] = extra
        score = schedule.next_after_ms(BASE_MS + i)  # each job at its own next slot, as the index holds it
        entries.append(DueEntry(f"j:job-{i:05d}", score, spec))
    return entries, ({(TENANT, calendar.name): calendar} if calendar else {})


def _job_id(i: int) -> str:
    return f"00000000-0000-4000-8000-{i:012d}"


def cases() -> list[tuple[str, Entries]]:
    plain = parse_schedule("*/5 * * * * *", "Europe/Berlin")
    slot_day = from_ms(plain.next_after_ms(BASE_MS)).date()
    # 30 dates a year apart from the slot's day: a calendar that excludes nothing today.
    quiet = Calendar(HOLIDAYS, frozenset(slot_day + timedelta(days=400 + d) for d in range(30)))
    # The slot's own day (in the job's zone and in UTC alike, as the base is mid-evening) and the next: moved
    # two days on.
    today = Calendar(HOLIDAYS, frozenset({slot_day, slot_day + timedelta(days=1), date(2027, 1, 1)}))
    return [
        ("plain, one spec shared", _entries(lambda i: (plain, None))),
        ("H/5 in the seconds, a spec per job", _entries(
            lambda i: (parse_schedule("H/5 * * * * *", "Europe/Berlin", hash_key=_job_id(i)), None))),
        ("spread_seconds 4, a spec per job", _entries(
            lambda i: (parse_schedule("*/5 * * * * *", "Europe/Berlin", hash_key=_job_id(i), spread_seconds=4),
                       None))),
        ("calendar, skip, the day not excluded", _entries(
            lambda i: (plain, {"exclude": [HOLIDAYS], "on_excluded": "skip"}), quiet)),
        ("calendar, skip, the day excluded", _entries(
            lambda i: (plain, {"exclude": [HOLIDAYS], "on_excluded": "skip"}), today)),
        ("calendar, next_day, the day not excluded", _entries(
            lambda i: (plain, {"exclude": [HOLIDAYS], "on_excluded": "next_day"}), quiet)),
        ("calendar, next_day, the day excluded (moved)", _entries(
            lambda i: (plain, {"exclude": [HOLIDAYS], "on_excluded": "next_day"}), today)),
    ]


def _best_us(work: Callable[[list[DueEntry]], object], entries: list[DueEntry],
             before: Callable[[], object] = lambda: None) -> float:
    """µs per entry: the sum over chunks of each chunk's best of REPEATS passes, over all entries."""
    total = 0
    for start in range(0, len(entries), CHUNK):
        chunk = entries[start:start + CHUNK]
        best = None
        for _ in range(REPEATS):
            before()
            started = time.perf_counter_ns()
            work(chunk)
            took = time.perf_counter_ns() - started
            best = took if best is None else min(best, took)
        total += best or 0
    return total / len(entries) / 1000


def _plan(calendars: dict[tuple[str, str], Calendar]) -> Callable[[list[DueEntry]], object]:
    def work(entries: list[DueEntry]) -> object:
        return plan_batch(entries, entries[0].score + 100, calendars=calendars)
    return work


def _resolve_us(entries: list[DueEntry], calendars: dict[tuple[str, str], Calendar]) -> float:
    cache = CalendarCache(clock=lambda: 0.0)
    cache._remember(list(calendars), {key: (cal.to_json(), from_ms(BASE_MS)) for key, cal in calendars.items()},
                    0.0)

    class NoDb:  # every calendar is fresh: resolve must not ask
        def connection(self) -> Any:
            raise AssertionError("a fresh calendar was read again")

    return _best_us(lambda chunk: cache.resolve(NoDb(), chunk), entries)


def run() -> list[tuple[str, str, str, str]]:
    rows = []
    plain_warm = None
    for name, (entries, calendars) in cases():
        work = _plan(calendars)
        work(entries)  # the cache warm with every spec
        warm = _best_us(work, entries)
        cold = _best_us(work, entries, engine._from_key.cache_clear)
        plain_warm = plain_warm or warm
        rows.append((name, f"{warm:.2f}", f"{warm / plain_warm:.2f}x", f"{cold:.2f}"))
    entries, calendars = cases()[3][1]
    rows.append(("calendar cache: a tick's entries scanned, all fresh", f"{_resolve_us(entries, calendars):.2f}",
                 "", ""))
    return rows


def main() -> None:
    print(f"the poller's plan of a tick's due jobs, µs per job (best of {REPEATS})")
    rows = run()
    header = ("due jobs planned", "µs/job warm", "vs plain", "µs/job cold")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    for r in [header, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
    print(f"\n{DUE_JOBS:,} due jobs per row, timed in chunks of {CHUNK}, each the best of {REPEATS} passes")


if __name__ == "__main__":
    main()
