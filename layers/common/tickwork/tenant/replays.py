"""Replaying a tenant's runs: one run (POST /executions/{id}/replay) or every matching run of a job's window
(POST /jobs/{id}/replay), sent again as the same runs through the normal executor (fresh signature, same
webhook-id), at the tenant's replay pace (tickwork.rules.replay), within its quota of replays waiting
(max_replays_queued, a 403 that changes nothing) and each run at most MAX_REPLAYS_PER_RUN times.

Postgres first, then the due index, as a retry is queued: the rows say `queued` / `retrying` with their due
time, so a lost Redis write is put back by the sweeper (tickwork.ops.maintenance) at that time.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Sequence

from aws_lambda_powertools import Logger

from tickwork.errors import ConflictError, InvalidInputError, NotFoundError, QuotaExceededError
from tickwork.rules import replay
from tickwork.scope import Scope
from tickwork.store import history as history_store
from tickwork.store import quotas as quotas_store
from tickwork.store import replays as store
from tickwork.store.history import ExecutionRow
from tickwork.tenant import audit, quotas
from tickwork.tenant.lookup import found, parse_id
from tickwork.timeutil import rfc3339, to_ms
from tickwork.vocab import AuditAction

logger = Logger(child=True)


@dataclass(frozen=True)
class ReplayAsk:
    """What POST /jobs/{id}/replay asks for: the job's runs in `statuses` with a slot in [since, until)."""

    since: datetime
    until: datetime
    statuses: tuple[str, ...] = replay.DEFAULT_STATUSES
    dry_run: bool = False


@dataclass(frozen=True)
class Replayed:
    """A batch replayed (or, dry, what would be): how many, their ids (the first MAX_IDS_LISTED) and when the
    first and the last go; `at_limit`: the runs of the window left as they are, replayed MAX_REPLAYS_PER_RUN
    times already."""

    count: int
    execution_ids: list[str]
    first_at: datetime | None
    last_at: datetime | None
    dry_run: bool
    at_limit: int = 0


def replay_execution(scope: Scope, execution_id: str) -> ExecutionRow:
    """Send one ended run again (a missed or skipped slot: its run for the first time); ConflictError for a
    run that succeeded or is in progress, or whose job was deleted."""
    execution_id = parse_id(execution_id, "execution")
    with scope.db.connection() as conn, conn.transaction():
        execution = found(history_store.get_execution(conn, scope.tenant_id, execution_id), "execution")
        if store.job_status(conn, scope.tenant_id, execution.job_id) in (None, "deleted"):
            raise ConflictError("the run's job was deleted: its runs cannot be replayed")
        why = replay.refusal(execution.status, execution.replay_count)
        if why is not None:
            raise ConflictError(why)
        queued = _queue(conn, scope, [execution_id], replay.REPLAYABLE)
        if not queued:
            raise ConflictError("the run changed while it was being replayed; read it again")
        execution = found(history_store.get_execution(conn, scope.tenant_id, execution_id), "execution")
        audit.record(conn, scope, AuditAction.JOB_REPLAYED, job_id=execution.job_id, target=execution_id)
    _dispatch(scope, queued)
    return execution


def replay_job(scope: Scope, job_id: str, ask: ReplayAsk) -> Replayed:
    """Replay every run of the job's window in the statuses asked (a dry run changes nothing)."""
    job_id = parse_id(job_id, "job")
    problem = replay.window_problem(ask.since, ask.until)
    if problem is not None:
        raise InvalidInputError("until", problem)
    with scope.db.connection() as conn, conn.transaction():
        if store.job_status(conn, scope.tenant_id, job_id) in (None, "deleted"):
            raise NotFoundError("job not found")
        runs = store.window(conn, scope.tenant_id, job_id, ask.statuses, ask.since, ask.until, replay.MAX_RUNS + 1)
        if len(runs) > replay.MAX_RUNS:
            raise InvalidInputError("until", replay.too_many(len(runs), runs[replay.MAX_RUNS - 1].scheduled_for))
        ids = [run.id for run in runs if run.replay_count < replay.MAX_REPLAYS_PER_RUN]
        at_limit = len(runs) - len(ids)
        if ask.dry_run:
            start = _start(conn, scope, store.pace_peek(conn, scope.tenant_id, scope.now), len(ids))
            return _answer(ids, replay.instants(start, len(ids), scope.settings.replay_per_second), True, at_limit)
        queued = _queue(conn, scope, ids, ask.statuses)
        if queued:  # the window as an ISO 8601 interval
            audit.record(conn, scope, AuditAction.JOB_REPLAYED, job_id=job_id,
                         target=f"{rfc3339(ask.since)}/{rfc3339(ask.until)}")
    _dispatch(scope, queued)
    return _answer([q.execution_id for q in queued], [q.due for q in queued], False, at_limit)


def _answer(ids: list[str], at: list[datetime], dry_run: bool, at_limit: int) -> Replayed:
    return Replayed(len(ids), ids[:replay.MAX_IDS_LISTED], at[0] if at else None, at[-1] if at else None, dry_run,
                    at_limit)


def _queue(conn: Any, scope: Scope, ids: Sequence[str], statuses: Sequence[str]) -> list[store.Queued]:
    """Take the runs' instants from the tenant's pace and make them due (the caller dispatches them once its
    transaction has committed: _dispatch)."""
    gap = replay.gap(scope.settings.replay_per_second)
    start = _start(conn, scope, store.pace_start(conn, scope.tenant_id, scope.now), len(ids))
    queued = store.queue(conn, scope.tenant_id, ids, statuses, scope.now, start, gap, replay.MAX_REPLAYS_PER_RUN)
    if queued:
        store.pace_advance(conn, scope.tenant_id, queued[-1].due + gap)
    return queued


def _start(conn: Any, scope: Scope, pace_next_at: datetime, count: int) -> datetime:
    """When the first of `count` runs replayed now goes; QuotaExceededError (max_replays_queued) when the
    tenant's replays waiting, these included, would be more than its quota."""
    per_second = scope.settings.replay_per_second
    limit = quotas.effective(scope.settings, quotas_store.get_overrides(conn, scope.tenant_id)).max_replays_queued
    why = replay.over_quota(replay.waiting(pace_next_at, scope.now, per_second), count, limit, per_second)
    if why is not None:
        raise QuotaExceededError("max_replays_queued", limit, why)
    return max(pace_next_at, scope.now + replay.lead(count))


def _dispatch(scope: Scope, queued: list[store.Queued]) -> None:
    """Each replayed run's attempt in the due index at its instant (one round trip), then one log line: a run's
    ids, or a batch's (execution_ids with `attempts` alongside, in slot order)."""
    if not queued:
        return
    pipe = scope.index.pipeline()
    for q in queued:
        scope.index.schedule_execution(q.execution_id, q.attempt, to_ms(q.due), pipeline=pipe)
    pipe.execute()
    ids: dict[str, Any] = ({"execution_id": queued[0].execution_id, "attempt": queued[0].attempt} if len(queued) == 1
                           else {"execution_ids": [q.execution_id for q in queued],
                                 "attempts": [q.attempt for q in queued]})
    logger.info("runs replayed", extra={"tenant_id": scope.tenant_id, "job_id": queued[0].job_id,
                                        "count": len(queued), **ids, "first_at": rfc3339(queued[0].due),
                                        "last_at": rfc3339(queued[-1].due)})
