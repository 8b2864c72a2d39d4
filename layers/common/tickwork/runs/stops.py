"""A pause or delete stops what was handed over ahead: at a run's instant, just before its write, the executor
reads the markers of its group's jobs (tickwork.dueindex.index, one Redis round trip per instant), and a run
of a marked job is sent only if Postgres says its job still makes it (a manual run or a replay of a paused
job, a pause since undone); otherwise it is recorded skipped with the reason. Neither store reachable: the run
goes out, as it would with its marker lost."""
from __future__ import annotations

from typing import Any, Sequence

from aws_lambda_powertools import Logger
from psycopg import Error as PostgresError
from redis.exceptions import RedisError

from tickwork import metrics
from tickwork.dueindex.index import DueIndex
from tickwork.models import StartedExecution
from tickwork.store import stops as store
from tickwork.vocab import NotStarted

logger = Logger(child=True)


def stopped_lately(index: DueIndex, runs: Sequence[StartedExecution]) -> set[str]:
    """Of these runs, due now, the ids of those whose job was marked paused or deleted."""
    if not runs:
        return set()
    try:
        marked = index.stopped_jobs([run.job_id for run in runs])
    except RedisError:
        logger.warning("could not read whether the runs' jobs were paused: they go out",
                       extra={"execution_ids": [run.id for run in runs]})
        return set()
    return {run.id for run in runs if run.job_id in marked}


def dropped(db: Any, runs: Sequence[StartedExecution]) -> set[str]:
    """Of these runs held back, the ids of those recorded skipped: their job no longer makes them."""
    if not runs:
        return set()
    try:
        with db.connection() as conn:  # a psycopg_pool.ConnectionPool
            stopped = store.drop_stopped(conn, [(run.id, run.attempt) for run in runs])
    except PostgresError:
        logger.warning("could not record runs of paused jobs skipped: they go out",
                       extra={"execution_ids": [run.id for run in runs]})
        return set()
    for run in runs:
        if run.id in stopped:
            logger.info("run not sent: its job was stopped before its instant", extra={
                "execution_id": run.id, "job_id": run.job_id, "attempt": run.attempt, "job_status": stopped[run.id]})
            metrics.record_not_started(NotStarted.SKIPPED)
    return set(stopped)
