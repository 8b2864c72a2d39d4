"""The self-healing pass, run once a minute under its own lock.

1. Reconcile the due index with Postgres: every active job indexed and nothing else (`rebuild_index`:
   going on with a rebuild while the index is not whole, else comparing it job by job),
   and claims that never reached Postgres undone (`rewind_unrecorded_claims`).
2. Sweep: put back dispatches that were lost (a run queued too long, a retry overdue or gone from the
   index), and end attempts whose executor died: `retrying` with the next attempt queued under the same
   run id, or `lost` when the retry policy has no attempt left. Notifications likewise (tickwork.notifications.sweep).
   Runs awaiting their completion callback past their deadline whose check the index lost are settled
   (tickwork.runs.awaiting).
3. Prune each tenant's oldest finished runs past its history quota (max_history_rows), then finished runs
   older than the retention, oldest first, a batch at a time until done or the pass's
   time for it is spent, and likewise Idempotency-Keys older than 24 hours, finished notifications and
   audit entries (kept as long as runs). Then each tenant's storage budget: its audit entries and stored
   Idempotency-Key answers counted, its keys held to their count cap and its oldest entries pruned past its
   max_storage_bytes (tickwork.ops.storage).
4. Re-encrypt onto the newest data key what a rotation left (tickwork.secrets.vault.reseal_unsettled).

Every step is safe to repeat and to run while pollers and executors work: a re-added dispatch is a
one-shot member that the executor's conditional start makes harmless when it is a duplicate, and an
attempt is only ended while it is still the running one.
"""
from __future__ import annotations

import contextlib
import random
import time
import uuid
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

from aws_lambda_powertools import Logger

from tickwork import metrics
from tickwork.dueindex.index import DueIndex
from tickwork.dueindex.reconcile import StepLimits, rebuild_index, rewind_unrecorded_claims
from tickwork.http.delivery import request_timeout_seconds
from tickwork.models import Dispatch
from tickwork.notifications import sweep
from tickwork.ops import storage
from tickwork.rules import replay, retry
from tickwork.runs import awaiting, bounds, ends
from tickwork.secrets import vault
from tickwork.settings import Settings
from tickwork.store import audit as audit_store
from tickwork.store import executions as executions_store
from tickwork.store import idempotency as idempotency_store
from tickwork.store import maintenance as store
from tickwork.store import notifications as notifications_store
from tickwork.store import quotas as quotas_store
from tickwork.tenant import quotas
from tickwork.tenant.idempotency import RETENTION
from tickwork.timeutil import to_ms
from tickwork.wiring import Services

logger = Logger(child=True)

# Shorter than the one-minute schedule: a run killed mid-way (Lambda timeout) never blocks the next one.
MAINTENANCE_LOCK_MS = 50_000
# Rows per round trip and round trips per step: one run stays well inside the poller Lambda's timeout;
# whatever is left waits for the next minute.
BATCH = 1000
MAX_BATCHES = 20
# Retention deletes a batch at a time until this long after the pass began, whatever the write rate (a
# fixed number of batches fell behind one tenant at quota): the poller Lambda has 10 s, and re-encryption
# after a key rotation (up to 2 s), the batch under way and the lock's release come after it.
RETENTION_UNTIL_SECONDS = 6.0
# The poller ticks once a second: a claim is in flight for at most the lookahead plus one tick.
TICK_MS = 1000
# A pass that finds the index not whole helps rebuild it this long, leaving the sweep and retention
# the rest of the poller Lambda's 10 s; ticks go on with the rebuild in between.
REBUILD = StepLimits(seconds=5.0)


@dataclass
class MaintenanceReport:
    locked: bool
    indexed: int = 0
    removed: int = 0
    rewound: int = 0
    redispatched: int = 0
    retried: int = 0
    lost: int = 0
    completions_settled: int = 0  # runs awaiting their completion whose deadline check the index lost
    pruned: int = 0
    history_pruned: int = 0  # past tenants' max_history_rows
    idempotency_keys_pruned: int = 0
    notifications_redispatched: int = 0
    notifications_lost: int = 0
    notifications_pruned: int = 0
    audit_events_pruned: int = 0
    storage_recounted: int = 0  # tenants whose storage usage was counted afresh from their rows
    idempotency_keys_capped: int = 0  # past max_idempotency_keys
    storage_pruned: int = 0  # audit entries and Idempotency-Keys past their tenant's max_storage_bytes
    storage_failed: int = 0  # tenants whose storage step failed (logged with its id)
    resealed: int = 0
    reseal_remaining: int = 0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class LostAttempt:
    """How to end an attempt whose executor never reported."""

    record: executions_store.AttemptRecord
    decision: retry.Decision  # 'retrying' with the next attempt's time, or 'lost'


def run_maintenance(svc: Services, now: datetime, clock: Callable[[], float] = time.monotonic) -> MaintenanceReport:
    """One pass; returns locked=False and does nothing while another pass holds the lock. `clock` (seconds,
    any origin) times the retention's budget."""
    index = svc.index
    token = uuid.uuid4().hex
    if not index.acquire_maintenance_lock(token, MAINTENANCE_LOCK_MS):
        return MaintenanceReport(locked=False)
    report = MaintenanceReport(locked=True)
    budget = store.Budget(clock() + RETENTION_UNTIL_SECONDS, clock)
    try:
        with svc.db.connection() as conn:
            reconcile(conn, index, now, svc.settings, report)
            report.redispatched = redispatch_awaiting(conn, index, now, svc.settings)
            report.retried, report.lost = expire_running(conn, index, now, svc.settings)
            report.completions_settled = awaiting.sweep(conn, index, now, svc.settings.sweep_after_seconds,
                                                        bool(svc.settings.operator_topic_arn), random.random)
            report.notifications_redispatched, report.notifications_lost = sweep.sweep(
                conn, index, now, svc.settings, BATCH)
            report.history_pruned = prune_history(conn, svc.settings, budget)
            report.pruned = prune(conn, now, svc.settings.retention_days, budget)
            report.idempotency_keys_pruned = idempotency_store.prune(conn, now - RETENTION, BATCH, budget)
            report.notifications_pruned = prune_notifications(conn, now, svc.settings.retention_days, budget)
            report.audit_events_pruned = prune_audit(conn, now, svc.settings.retention_days, budget)
            held = storage.hold_budgets(conn, svc.settings, now, budget)
            report.storage_recounted, report.idempotency_keys_capped = held.recounted, held.keys_capped
            report.storage_pruned, report.storage_failed = held.pruned, held.failed
        reseal(svc, report)
    finally:
        index.release_maintenance_lock(token)
    return report


def handle_maintenance(svc: Services, clock: Callable[[], float]) -> dict[str, Any]:
    report = run_maintenance(svc, datetime.fromtimestamp(clock(), tz=timezone.utc))
    logger.info("maintenance finished", extra=report.as_dict())
    metrics.record_maintenance(report)
    metrics.flush()
    return {"task": "maintenance", **report.as_dict()}


# ---------------------------------------------------------------- reconcile

def reconcile(conn: Any, index: DueIndex, now: datetime, settings: Settings, report: MaintenanceReport) -> None:
    rebuilt = rebuild_index(conn, index, now, REBUILD)
    report.indexed, report.removed = rebuilt.indexed, rebuilt.removed
    report.rewound = rewind_unrecorded_claims(conn, index, rewind_before(now, settings))


def rewind_before(now: datetime, settings: Settings) -> datetime:
    """A claim of a slot older than this that Postgres never recorded is lost, not in flight."""
    grace_ms = max(settings.reconcile_grace_seconds * 1000, settings.lookahead_ms + TICK_MS)
    return now - timedelta(milliseconds=grace_ms)


# ---------------------------------------------------------------- sweep

def redispatch_awaiting(conn: Any, index: DueIndex, now: datetime, settings: Settings) -> int:
    """Put back the dispatch of every run waiting for one that the index does not hold; returns how many."""
    stale = now - timedelta(seconds=settings.sweep_after_seconds)
    ahead = now + timedelta(milliseconds=settings.lookahead_ms + TICK_MS)
    restored = 0
    for page in store.awaiting_dispatch(conn, stale, ahead, BATCH, MAX_BATCHES):
        restored += index.restore_executions([redispatch(run, now) for run in page])
    if restored:
        logger.warning("re-dispatched runs whose dispatch was lost", extra={"runs": restored})
    return restored


def redispatch(run: store.AwaitingDispatch, now: datetime) -> Dispatch:
    """An overdue run fires at once; a retry still ahead keeps its time."""
    due = run.next_attempt_at if run.next_attempt_at is not None and run.next_attempt_at > now else now
    return Dispatch(run.execution_id, run.attempt, to_ms(due))


def expire_running(
    conn: Any, index: DueIndex, now: datetime, settings: Settings, uniform: retry.Random | None = random.random,
) -> tuple[int, int]:
    """End every attempt whose executor can no longer report; returns (retried, lost). A retry is timed
    as the executor times one: jittered by the job's policy (`uniform`: the random source) and never
    after the job's next slot unless the policy allows it."""
    ended = {"retrying": 0, "lost": 0}
    before = now - timedelta(seconds=settings.lost_margin_seconds)
    for page in store.long_running(conn, before, BATCH, MAX_BATCHES):
        judged = [(run, lost) for run in page if (lost := judge_running(run, now, settings, uniform)) is not None]
        for run, lost in _bounded_retries(conn, judged):
            if end_attempt(conn, index, run, lost, now, bool(settings.operator_topic_arn)):
                ended[lost.decision.status] += 1
    if any(ended.values()):
        logger.warning("ended attempts whose executor never reported", extra=ended)
    return ended["retrying"], ended["lost"]


def judge_running(
    run: store.RunningAttempt, now: datetime, settings: Settings, uniform: retry.Random | None = None,
) -> LostAttempt | None:
    """None while the attempt's executor may still report; otherwise how to end the attempt (a retry
    jittered with `uniform` when given, as the executor's are)."""
    limit = request_timeout_seconds(run.request, settings.max_request_timeout_seconds) + settings.lost_margin_seconds
    if now < run.started_at + timedelta(seconds=limit):
        return None
    elapsed_ms = int((now - run.started_at) / timedelta(milliseconds=1))
    record = executions_store.AttemptRecord(
        run.attempt, run.started_at, elapsed_ms, None, None, f"lost: executor did not report within {limit:g} s")
    # The request may have been sent: a retry repeats it under the same run id, as after a timeout.
    decision = retry.decide(retry.RetryPolicy.from_dict(run.retry), replay.replay_attempt(run.attempt, run.replay_base),
                            False, True, now, random=uniform)
    return LostAttempt(record, decision if decision.status == "retrying" else retry.Decision("lost"))


def bound_retry(run: store.RunningAttempt, lost: LostAttempt, limit: retry.Bound) -> LostAttempt:
    """A retry of a run its job no longer makes (paused or deleted), or one the policy would place after
    the job's next slot (unless it allows retries past the next run), ends the run `lost` instead, with
    the reason in the attempt's error."""
    bounded = retry.within(retry.RetryPolicy.from_dict(run.retry), lost.decision, limit)
    if bounded is lost.decision:
        return lost
    return LostAttempt(replace(lost.record, error=f"{lost.record.error}; {bounded.reason}"), retry.Decision("lost"))


def _bounded_retries(
    conn: Any, judged: list[tuple[store.RunningAttempt, LostAttempt]],
) -> list[tuple[store.RunningAttempt, LostAttempt]]:
    """bound_retry for a page of lost attempts: one read of the jobs of those that retry."""
    return bounds.bounded(lambda: contextlib.nullcontext(conn), judged,
                          lambda item: bounds.Retrying(item[0].execution_id, item[0].job_id,
                                                       replay.retry_origin(item[0].scheduled_for, item[0].started_at,
                                                                           item[0].replayed),
                                                       item[0].retry, item[1].decision),
                          lambda item, limit: (item[0], bound_retry(item[0], item[1], limit)))


def end_attempt(
    conn: Any, index: DueIndex, run: store.RunningAttempt, lost: LostAttempt, now: datetime, operator: bool = False,
) -> bool:
    """Record the lost attempt unless its executor reported meanwhile; then queue what comes next. A run
    ending `lost` is a final failure: its notifications are written with it (tickwork.runs.ends)."""
    decision = lost.decision
    if decision.status == "lost":
        kept, released = ends.end_lost(conn, index, run.execution_id, lost.record, now, operator)
    else:
        kept, released = executions_store.finish_attempt(
            conn, run.execution_id, lost.record, decision.status, decision.next_attempt_at)
    if not kept:
        return False
    if decision.next_attempt_at is not None:
        index.schedule_execution(run.execution_id, run.attempt + 1, to_ms(decision.next_attempt_at))
    if released is not None:
        index.schedule_execution(released, 1, to_ms(now))
    return True


# ---------------------------------------------------------------- re-encryption

def reseal(svc: Services, report: MaintenanceReport) -> None:
    """Finish a data key rotation the admin call started (or one a killed call left), a little each pass."""
    done = vault.reseal_unsettled(svc.keyring, svc.db)
    if done is not None:
        report.resealed = done.secrets + done.signing_secrets + done.jobs
        report.reseal_remaining = sum(done.remaining.values())


# ---------------------------------------------------------------- retention

def prune_history(conn: Any, settings: Settings, budget: store.Budget) -> int:
    """Bring every tenant back to its history quota (max_history_rows): its oldest finished runs go first,
    a tenant at a time until the budget is spent (the next pass goes on); returns how many runs went."""
    pruned = 0
    for tenant_id, override in quotas_store.history_overrides(conn):
        keep = quotas.effective(settings, {"max_history_rows": override}).max_history_rows
        count = store.prune_history(conn, tenant_id, keep, BATCH, budget)
        if count:
            logger.info("pruned history past the tenant's quota",
                        extra={"tenant_id": tenant_id, "runs": count, "max_history_rows": keep})
        pruned += count
        if budget.spent():
            break
    return pruned


def prune(conn: Any, now: datetime, retention_days: int, budget: store.Budget) -> int:
    """Delete finished runs (and their attempts) older than the retention, oldest first, until done or the
    budget is spent; 0 days keeps everything."""
    if retention_days <= 0:
        return 0
    return store.prune_executions(conn, now - timedelta(days=retention_days), BATCH, budget)


def prune_notifications(conn: Any, now: datetime, retention_days: int, budget: store.Budget) -> int:
    """Finished notifications go after the same retention as runs."""
    if retention_days <= 0:
        return 0
    return notifications_store.prune(conn, now - timedelta(days=retention_days), BATCH, budget)


def prune_audit(conn: Any, now: datetime, retention_days: int, budget: store.Budget) -> int:
    """Audit entries go after the same retention as runs (a tenant's history quota does not bound them)."""
    if retention_days <= 0:
        return 0
    return audit_store.prune(conn, now - timedelta(days=retention_days), BATCH, budget)
