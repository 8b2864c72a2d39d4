"""The due-index rebuild as it was at commit 149bc66, kept callable for the benchmark only (the yardstick
of bench/rebuild.py, measured in the same run on the same data).

One pass inside one tick: page through active jobs (id and policy only), read their index state, and
for each one missing re-read the whole job row (request and retry JSON included), parse its schedule,
and write it with one ZADD and one HSET in a pipeline; then ZSCAN the set for dead members; then mark
the index built. Only the SQL of the old store functions is copied here; the rest calls today's code
where it is unchanged (DueIndex.put_job / remove_job / job_ids, scheduling.job_schedule / job_spec).
"""
from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from bench.harness import mark_built
from tickwork.dueindex.entries import job_member
from tickwork.dueindex.index import DueIndex
from tickwork.errors import ScheduleError
from tickwork.schedule import specs as scheduling
from tickwork.store import jobs as jobs_store
from tickwork.timeutil import to_ms

BATCH = 1000
_FIRST_ID = "00000000-0000-0000-0000-000000000000"
_ACTIVE_JOBS = """
SELECT id::text, version, catchup, catchup_window_seconds FROM jobs
 WHERE status = 'active' AND id > %(after)s::uuid
 ORDER BY jobs.id LIMIT %(limit)s
"""
_ACTIVE_AMONG = "SELECT id::text FROM jobs WHERE id = ANY(%(ids)s::uuid[]) AND status = 'active'"


def rebuild_index(conn: Any, index: DueIndex, redis: Any, now: datetime) -> int:
    """The old `reconcile.rebuild_index`; returns how many jobs it wrote."""
    indexed = 0
    after = _FIRST_ID
    while True:
        page = conn.execute(_ACTIVE_JOBS, {"after": after, "limit": BATCH}).fetchall()
        states = _states(redis, index, [row[0] for row in page])
        outdated = [row[0] for row, state in zip(page, states) if _outdated(row, *state)]
        indexed += _index_jobs(conn, index, outdated, now)
        if len(page) < BATCH:
            break
        after = page[-1][0]
    for job_ids in index.job_ids(BATCH):
        active = {row[0] for row in conn.execute(_ACTIVE_AMONG, {"ids": job_ids})}
        for dead in set(job_ids) - active:
            index.remove_job(dead)
    mark_built(index, to_ms(now))
    return indexed


def _states(redis: Any, index: DueIndex, job_ids: list[str]) -> list[tuple[Any, Any]]:
    if not job_ids:
        return []
    pipe = redis.pipeline(transaction=False)
    pipe.zmscore(index.due_key, [job_member(job_id) for job_id in job_ids])
    pipe.hmget(index.specs_key, job_ids)
    scores, specs = pipe.execute()
    return [(score, None if spec is None else json.loads(spec)) for score, spec in zip(scores, specs)]


def _outdated(row: tuple[Any, ...], score: Any, spec: dict[str, Any] | None) -> bool:
    if score is None or spec is None:
        return True
    return (spec.get("v"), spec.get("cw"), spec.get("ca")) != (row[1], row[3], row[2])


def _index_jobs(conn: Any, index: DueIndex, job_ids: list[str], now: datetime) -> int:
    if not job_ids:
        return 0
    jobs = {job.id: job for job in jobs_store.get_jobs(conn, job_ids)}
    pipe = index.pipeline()
    written = 0
    for job_id in job_ids:
        job = jobs.get(job_id)
        try:
            schedule = scheduling.job_schedule(job) if job is not None and job.status == "active" else None
        except ScheduleError:
            schedule = None
        next_run_at = None if schedule is None else job.next_run_at or scheduling.first_slot(schedule, now)
        if next_run_at is None:
            index.remove_job(job_id, pipe)
            continue
        index.put_job(job_id, scheduling.job_spec(job, schedule), to_ms(next_run_at), pipeline=pipe, keep_score=True)
        written += 1
    pipe.execute()
    return written
