"""Tenant quotas: how many jobs a tenant may have, how often one may run, how many runs a minute they add up
to. Deployment-wide defaults come from the settings; the admin operation `set-quotas` overrides them per
tenant. The rules are pure; `enforce` reads the tenant's rows under its row lock and applies them.

A schedule counts as the most runs it can make in any 60 seconds (`runs_per_minute`): a cron as many as
its seconds field matches (1 for a five-field cron), rate(N seconds) as ceil(60 / N), anything slower and a
one-off at() as 1. Start and end windows are not considered. Only active jobs count towards
max_runs_per_minute; every job not deleted counts towards max_jobs. max_history_rows is not checked on a
write: maintenance prunes a tenant's oldest finished runs past it (tickwork.ops.maintenance).
max_runs_in_flight bounds the tenant's runs dispatched and not yet ended, when they are dispatched
(tickwork.dispatch.budget). max_storage_bytes refuses nothing either: maintenance deletes a tenant's oldest audit
entries and stored answers past it (tickwork.ops.storage). max_replays_queued bounds its replayed runs waiting
for their instant of its replay pace, when a replay is asked for (tickwork.tenant.replays).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Any, Mapping

from tickwork.errors import QuotaExceededError
from tickwork.models import Job
from tickwork.schedule import hashing
from tickwork.schedule.engine import Schedule, min_gap_seconds, parse_schedule
from tickwork.schedule.specs import job_schedule
from tickwork.settings import Settings
from tickwork.store import quotas as store
from tickwork.vocab import JobStatus

QUOTA_FIELDS = ("max_jobs", "min_interval_seconds", "max_runs_per_minute", "max_history_rows", "max_runs_in_flight",
                "max_storage_bytes", "max_replays_queued")
# Any whole minute works: a cron's matching minutes all hold the same seconds. One long before any zone's
# sub-minute historical offsets would be out of place, and after none.
_REFERENCE = datetime(2024, 1, 1, tzinfo=timezone.utc)
_MINUTE = timedelta(seconds=60)


@dataclass(frozen=True)
class Quotas:
    max_jobs: int
    min_interval_seconds: int
    max_runs_per_minute: int
    max_history_rows: int
    max_runs_in_flight: int  # enforced when runs are dispatched (tickwork.dispatch.budget), not here
    max_storage_bytes: int  # held by maintenance (tickwork.ops.storage), not here
    max_replays_queued: int  # enforced when runs are replayed (tickwork.tenant.replays)

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in QUOTA_FIELDS}


def effective(settings: Settings, overrides: Mapping[str, int | None]) -> Quotas:
    """The tenant's quotas: its overrides where set, the deployment's defaults elsewhere."""
    defaults = Quotas(settings.max_jobs, settings.min_interval_seconds, settings.max_runs_per_minute,
                      settings.max_history_rows, settings.max_runs_in_flight, settings.max_storage_bytes,
                      settings.max_replays_queued)
    return Quotas(**{name: _pick(overrides.get(name), getattr(defaults, name)) for name in QUOTA_FIELDS})


def _pick(override: int | None, default: int) -> int:
    return default if override is None else override


def runs_per_minute(schedule: Schedule) -> int:
    """The most runs `schedule` makes in any 60 seconds (see the module's docstring)."""
    return _peak(schedule.canonical, schedule.timezone)


@lru_cache(maxsize=4096)
def _peak(canonical: str, zone_name: str) -> int:
    # Counted by schedule text, not per job: an H is read with the preview key, whose runs a minute are
    # those of any job's but for an uneven step (H/7 seconds: 8 or 9 a minute). A spread shifts, never adds.
    schedule = parse_schedule(canonical, zone_name, hash_key=hashing.PREVIEW_KEY)
    if min_gap_seconds(schedule) is None:
        return 1
    first = schedule.next_after(_REFERENCE - timedelta(microseconds=1))
    if first is None:
        return 0
    count, cursor = 0, first  # type: int, datetime | None
    while cursor is not None and cursor < first + _MINUTE:
        count += 1
        cursor = schedule.next_after(cursor)
    return count


def check_interval(quotas: Quotas, schedule: Schedule) -> None:
    gap = min_gap_seconds(schedule)
    if gap is not None and gap < quotas.min_interval_seconds:
        raise QuotaExceededError("min_interval_seconds", quotas.min_interval_seconds,
                                 f"runs {gap}s apart; this tenant's jobs may run at most every "
                                 f"{quotas.min_interval_seconds}s (min_interval_seconds)")


def check_job_count(quotas: Quotas, existing: int) -> None:
    if existing + 1 > quotas.max_jobs:
        raise QuotaExceededError("max_jobs", quotas.max_jobs,
                                 f"this tenant may have at most {quotas.max_jobs} jobs (max_jobs); delete some first")


def check_runs(quotas: Quotas, others: int, added: int) -> None:
    if others + added > quotas.max_runs_per_minute:
        raise QuotaExceededError("max_runs_per_minute", quotas.max_runs_per_minute,
                                 f"this job would make {added} of {others + added} runs a minute; this tenant's "
                                 f"active jobs may make at most {quotas.max_runs_per_minute} (max_runs_per_minute)")


def needs_check(before: Job | None, after: Job) -> bool:
    """Only a new job, a job becoming active, or an active job's new timing can break a quota."""
    if before is None:
        return True
    return after.status == JobStatus.ACTIVE and (before.status != JobStatus.ACTIVE or before.timing != after.timing)


def enforce(conn: Any, settings: Settings, before: Job | None, after: Job) -> None:
    """Raise QuotaExceededError if writing `after` (a new job when `before` is None) breaks a quota.

    Locks the tenant's row until the caller's transaction ends, so concurrent creates and resumes of one
    tenant count one after the other and cannot overshoot together."""
    if not needs_check(before, after):
        return
    quotas = effective(settings, store.lock_tenant(conn, after.tenant_id))
    schedule = job_schedule(after)
    check_interval(quotas, schedule)
    if before is None:
        check_job_count(quotas, store.count_jobs(conn, after.tenant_id))
    if after.status == JobStatus.ACTIVE:
        others = store.active_schedules(conn, after.tenant_id, after.id)
        total = sum(count * _peak(canonical, zone) for canonical, zone, count in others)
        check_runs(quotas, total, runs_per_minute(schedule))

