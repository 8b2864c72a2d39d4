"""The encoded due-index specs of many stored jobs, each schedule parsed once: what a rebuild of the due index
writes (tickwork.dueindex.reconcile). A job's own spec is tickwork.schedule.specs.job_spec."""
from __future__ import annotations

from typing import Any, Union

from tickwork.dueindex.entries import encode_spec
from tickwork.dueindex.index import DueIndex
from tickwork.models import Job
from tickwork.schedule.specs import job_spec
from tickwork.store.maintenance import IndexRow
from tickwork.timeutil import to_ms
from tickwork.vocab import JobStatus

# A job as stored, whole or only the columns the due index needs: both have the fields used here.
StoredJob = Union[Job, IndexRow]
# Encoded specs one IndexSpecs keeps before starting afresh: rate() jobs may each have their own.
SPEC_MEMO_SIZE = 10_000
ANCHORED = "anchored"  # a spec that depends on its job's anchor (rate()): looked up with it
OWN = "own"  # a spec that depends on its job's id (an H, a spread): never shared



def index_job(index: DueIndex, job: Job, pipeline: Any = None) -> None:
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
               job.calendar)
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
