"""Glue between jobs, their schedules and the due index: a stored job's schedule and the spec the index keeps
for it. Pure; `now` is always passed in. Writing a job's entry (index_job) and the specs of many stored jobs,
encoded once (a rebuild), are tickwork.dueindex.specs."""
from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from tickwork.models import CalendarRef, Job
from tickwork.rules import policy
from tickwork.schedule.engine import Schedule, from_spec, parse_schedule


class StoredJob(Protocol):
    """A job as stored, whole (Job) or only the columns the due index needs (store.maintenance.IndexRow)."""

    @property
    def id(self) -> str: ...
    @property
    def tenant_id(self) -> str: ...
    @property
    def schedule(self) -> str: ...
    @property
    def timezone(self) -> str: ...
    @property
    def start_at(self) -> datetime | None: ...
    @property
    def end_at(self) -> datetime | None: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def version(self) -> int: ...
    @property
    def catchup(self) -> str: ...
    @property
    def catchup_window_seconds(self) -> int: ...
    @property
    def spread_seconds(self) -> int: ...
    @property
    def calendar(self) -> CalendarRef | None: ...


# Parsed schedules of stored jobs kept before starting afresh.
SPEC_MEMO_SIZE = 10_000
# Parsed schedules of stored jobs, by what they are parsed from (job_schedule).
_PARSED: dict[tuple[Any, ...], Schedule] = {}


def job_schedule(job: StoredJob) -> Schedule:
    """The schedule of a stored job; rates count from start_at, else from the job's creation. Its H and
    its spread offset come from the job's id, so every slot computed for the job is already shifted.
    Parsed once per job and timing (a request asks several times: its quota, calendars, index entry, view)."""
    key = _parsed_key(job)
    found = _PARSED.get(key)
    if found is None:
        found = parse_schedule(
            job.schedule, job.timezone, anchor=key[2], start_at=job.start_at, end_at=job.end_at, hash_key=job.id,
            spread_seconds=job.spread_seconds,
        )
        _remember(_PARSED, key, found)
    return found


def remember(job: Job, schedule: Schedule) -> None:
    """`schedule`, just parsed (and checked) from what the job's timing was given as, is the job's: its
    job_schedule without parsing it again."""
    _remember(_PARSED, _parsed_key(job), schedule.stored())


def _parsed_key(job: StoredJob) -> tuple[Any, ...]:
    anchor = job.start_at or job.created_at
    return job.schedule, job.timezone, anchor, job.start_at, job.end_at, job.id, job.spread_seconds


def index_spec(
    schedule: Schedule, version: int, catchup_window_seconds: int = policy.DEFAULT_CATCHUP_WINDOW_SECONDS,
    catchup: str = policy.DEFAULT_CATCHUP, tenant_id: str | None = None,
) -> dict[str, Any]:
    """What the due index keeps per job: what the poller needs to plan a slot, the version it is for, and
    the tenant whose share of a tick's backlog claims it takes (tickwork.dispatch.backlog)."""
    spec = {"v": version, "s": schedule.spec(), "cw": catchup_window_seconds, "ca": catchup}
    if tenant_id is not None:
        spec["t"] = tenant_id
    return spec


def schedule_of(spec: dict[str, Any]) -> Schedule:
    return from_spec(spec["s"])


def plan_claim(spec: dict[str, Any], schedule: Schedule, slot_ms: int, now_ms: int) -> policy.SlotPlan:
    """What claiming `slot_ms` means for the job whose index spec this is (see tickwork.rules.policy)."""
    window_ms = int(spec.get("cw", policy.DEFAULT_CATCHUP_WINDOW_SECONDS)) * 1000
    return policy.plan_slot(schedule, slot_ms, now_ms, window_ms, spec.get("ca", policy.DEFAULT_CATCHUP))


def first_slot(schedule: Schedule, now: datetime) -> datetime | None:
    """Where a new, updated or resumed job starts: its first slot strictly in the future."""
    return schedule.next_after(now)


def job_spec(job: StoredJob, schedule: Schedule | None = None) -> dict[str, Any]:
    """The index spec of a stored job (`schedule`: its parsed schedule, when the caller has it); a job with a
    calendar carries it as `c` (its names and mode: the poller reads the calendars themselves, cached)."""
    spec = index_spec(schedule or job_schedule(job), job.version, job.catchup_window_seconds, job.catchup,
                      job.tenant_id)
    if job.calendar:
        spec["c"] = job.calendar.to_dict()
    return spec


def _remember(memo: dict[Any, Any], key: Any, value: Any) -> None:
    if len(memo) >= SPEC_MEMO_SIZE:
        memo.clear()
    memo[key] = value
