"""Glue between jobs, their schedules and the due index. Pure where it can be: `now` is always passed in."""
from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Union

from tickwork.dueindex.entries import encode_spec
from tickwork.dueindex.index import DueIndex
from tickwork.models import JobRow
from tickwork.rules import policy
from tickwork.schedule.engine import Schedule, from_spec, parse_schedule
from tickwork.timeutil import to_ms
from tickwork.vocab import JobStatus

if TYPE_CHECKING:
    from tickwork.store.maintenance import IndexRow

# A job as stored, whole or only the columns the due index needs: both have the fields used here.
StoredJob = Union[JobRow, "IndexRow"]
# Encoded specs one IndexSpecs keeps before starting afresh: rate() jobs may each have their own.
SPEC_MEMO_SIZE = 10_000
ANCHORED = "anchored"  # a spec that depends on its job's anchor (rate()): looked up with it
OWN = "own"  # a spec that depends on its job's id (an H, a spread): never shared


def job_schedule(job: StoredJob) -> Schedule:
    """The schedule of a stored job; rates count from start_at, else from the job's creation. Its H and
    its spread offset come from the job's id, so every slot computed for the job is already shifted."""
    return parse_schedule(
        job.schedule, job.timezone, anchor=job.start_at or job.created_at, start_at=job.start_at, end_at=job.end_at,
        hash_key=job.id, spread_seconds=job.spread_seconds,
    )


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
        spec["c"] = job.calendar
    return spec


def index_job(index: DueIndex, job: JobRow, pipeline: Any = None) -> None:
    """Make the due index match a job already written to Postgres (the source of truth)."""
    if job.status != JobStatus.ACTIVE or job.next_run_at is None:
        index.remove_job(job.id, pipeline)
        return
    index.put_job(job.id, job_spec(job), to_ms(job.next_run_at), pipeline)


class IndexSpecs:
    """Encoded index specs of stored jobs, each schedule parsed once: a rebuild writes thousands of jobs
    that share a handful of schedules. A rate() depends on its job's own anchor (start_at, else
    created_at), so rate jobs share a spec only when they share a start_at; an H or a spread depends on
    the job's id, so such a spec is the job's own."""

    def __init__(self) -> None:
        # By schedule, time zone, window, version, policy and tenant: the encoded spec, or ANCHORED for a rate().
        self._plain: dict[tuple[Any, ...], str] = {}
        self._anchored: dict[tuple[Any, ...], str] = {}  # the same key plus the anchor, for rate() jobs

    def encoded(self, job: StoredJob) -> str:
        """`encode_spec(job_spec(job))`; raises ScheduleError when the stored schedule no longer parses."""
        key = (job.schedule, job.timezone, job.start_at, job.end_at, job.version, job.catchup,
               job.catchup_window_seconds, job.tenant_id, job.spread_seconds,
               encode_spec(job.calendar) if job.calendar else None)
        found = self._plain.get(key)
        if found is None:
            spec = job_spec(job)
            found = _shared(spec) or encode_spec(spec)
            _remember(self._plain, key, found)
        if found == OWN:
            return encode_spec(job_spec(job))
        if found != ANCHORED:
            return found
        anchored_key = (*key, job.start_at or job.created_at)
        found = self._anchored.get(anchored_key)
        if found is None:
            found = encode_spec(job_spec(job))
            _remember(self._anchored, anchored_key, found)
        return found


def _shared(spec: dict[str, Any]) -> str | None:
    """OWN or ANCHORED when other jobs with the same columns would not have this spec, else None."""
    schedule = spec["s"]
    if "hash_key" in schedule or "offset_ms" in schedule:
        return OWN
    return ANCHORED if schedule["anchor_ms"] is not None else None


def _remember(memo: dict[Any, Any], key: Any, value: Any) -> None:
    if len(memo) >= SPEC_MEMO_SIZE:
        memo.clear()
    memo[key] = value
