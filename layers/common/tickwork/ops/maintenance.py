"""The self-healing pass, run once a minute under its own lock.

1. Reconcile the due index with Postgres: every active job indexed and nothing else (`rebuild_index`:
   going on with a rebuild while the index is not whole, else comparing it job by job),
   and claims that never reached Postgres undone (`rewind_unrecorded_claims`).
2. Sweep: put back dispatches that were lost (a run queued too long, a retry overdue or gone from the
   index), and end attempts whose executor died: `retrying` with the next attempt queued under the same
   run id, or `lost` when the retry policy has no attempt left. Notifications likewise (tickwork.notifications.sweep).
   Runs awaiting their completion callback past their deadline whose check the index lost are settled
   (tickwork.runs.awaiting). Jobs whose schedule or max_runs is over and whose last slot no run's end will
   close (skipped or missed) are completed or deleted (tickwork.runs.ending.finish).
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
from dataclasses import dataclass, field
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
from tickwork.rules import retry
from tickwork.runs import awaiting, ending
from tickwork.secrets import vault
from tickwork.settings import Settings
from tickwork.store import audit as audit_store
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
    jobs_finished: int = 0  # jobs completed or deleted with no run left to end them (last slot skipped or missed)
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
    unjudged: int = 0  # running attempts whose end could not be decided (each logged with its run): left running
    failed_steps: list[str] = field(default_factory=list)  # steps that raised (logged): the others still ran

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def run_maintenance(svc: Services, now: datetime, clock: Callable[[], float] = time.monotonic) -> MaintenanceReport:
    """One pass; returns locked=False and does nothing while another pass holds the lock. `clock` (seconds,
    any origin) times the retention's budget."""
    index = svc.index
    token = uuid.uuid4().hex
    if not index.acquire_maintenance_lock(token, MAINTENANCE_LOCK_MS):
        return MaintenanceReport(locked=False)
    report = MaintenanceReport(locked=True)
    budget = store.Budget(clock() + RETENTION_UNTIL_SECONDS, clock)
    step = _Steps(report)
    settings = svc.settings
    try:
        with svc.db.connection() as conn:
            step("reconcile", lambda: reconcile(conn, index, now, settings, report))
            step("redispatch", lambda: setattr(report, "redispatched", redispatch_awaiting(conn, index, now, settings)))
            step("expire_running", lambda: expire_running(conn, index, now, settings, report=report))
            step("completions", lambda: setattr(report, "completions_settled", awaiting.sweep(
                conn, index, now, settings.sweep_after_seconds, bool(settings.operator_topic_arn), random.random)))
            step("finish_jobs", lambda: setattr(report, "jobs_finished", finish_jobs(conn, index, now)))
            step("notifications", lambda: _sweep_notifications(conn, index, now, settings, report))
            step("history", lambda: setattr(report, "history_pruned", prune_history(conn, settings, budget)))
            step("retention", lambda: _retention(conn, now, settings, budget, report))
            step("storage", lambda: _hold_storage(conn, settings, now, budget, report))
        step("reseal", lambda: reseal(svc, report))
    finally:
        index.release_maintenance_lock(token)
    return report


class _Steps:
    """Runs the pass's steps one after another; a step that raises is logged and named in the report, and the
    steps after it still run (one bad row or table never stops the sweep and retention of everyone else)."""

    def __init__(self, report: MaintenanceReport) -> None:
        self.report = report

    def __call__(self, name: str, work: Callable[[], Any]) -> None:
        try:
            work()
        except Exception:
            logger.exception("maintenance step failed: the next steps still run", extra={"step": name})
            self.report.failed_steps.append(name)


def _sweep_notifications(conn: Any, index: DueIndex, now: datetime, settings: Settings,
                         report: MaintenanceReport) -> None:
    report.notifications_redispatched, report.notifications_lost = sweep.sweep(conn, index, now, settings, BATCH)


def _retention(conn: Any, now: datetime, settings: Settings, budget: store.Budget, report: MaintenanceReport) -> None:
    report.pruned = prune(conn, now, settings.retention_days, budget)
    report.idempotency_keys_pruned = idempotency_store.prune(conn, now - RETENTION, BATCH, budget)
    report.notifications_pruned = prune_notifications(conn, now, settings.retention_days, budget)
    report.audit_events_pruned = prune_audit(conn, now, settings.retention_days, budget)


def _hold_storage(conn: Any, settings: Settings, now: datetime, budget: store.Budget,
                  report: MaintenanceReport) -> None:
    held = storage.hold_budgets(conn, settings, now, budget)
    report.storage_recounted, report.idempotency_keys_capped = held.recounted, held.keys_capped
    report.storage_pruned, report.storage_failed = held.pruned, held.failed


class MaintenanceStepsFailed(RuntimeError):
    """Raised after the whole pass ran, so the invocation counts as an error (the poller's Errors alarm)."""


def handle_maintenance(svc: Services, clock: Callable[[], float]) -> dict[str, Any]:
    report = run_maintenance(svc, datetime.fromtimestamp(clock(), tz=timezone.utc))
    logger.info("maintenance finished", extra=report.as_dict())
    metrics.record_maintenance(report)
    metrics.flush()
    if report.failed_steps:
        raise MaintenanceStepsFailed(f"maintenance steps failed (logged above): {', '.join(report.failed_steps)}")
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


def finish_jobs(conn: Any, index: DueIndex, now: datetime) -> int:
    """Complete or delete the jobs whose schedule or max_runs is over and that no run's end will finish (their
    last slot skipped or missed); returns how many."""
    return sum(len(ending.finish(conn, index, page, now)) for page in store.unfinished_jobs(conn, BATCH, MAX_BATCHES))


def redispatch(run: store.AwaitingDispatch, now: datetime) -> Dispatch:
    """An overdue run fires at once; a retry still ahead keeps its time."""
    due = run.next_attempt_at if run.next_attempt_at is not None and run.next_attempt_at > now else now
    return Dispatch(run.execution_id, run.attempt, to_ms(due))


def expire_running(
    conn: Any, index: DueIndex, now: datetime, settings: Settings, uniform: retry.Random | None = random.random,
    report: MaintenanceReport | None = None,
) -> tuple[int, int]:
    """End every attempt whose executor can no longer report, the way every attempt ends (tickwork.runs.ending):
    retried as after a timeout (jittered by the job's policy with `uniform`, never after the job's next slot
    unless the policy allows it), or `lost` with no attempt left. Returns (retried, lost), also set on
    `report` with the attempts that could not be judged (left running, logged, tried again next pass)."""
    ended = {"retrying": 0, "lost": 0}
    unjudged = 0
    before = now - timedelta(seconds=settings.lost_margin_seconds)
    for page in store.long_running(conn, before, BATCH, MAX_BATCHES):
        lost = []
        for running in page:
            try:
                if (end := judge_running(running, now, settings, uniform)) is not None:
                    lost.append(end)
            except Exception:
                unjudged += 1
                logger.exception("could not judge an attempt whose executor never reported: left running", extra={
                    "job_id": running.run.job_id, "execution_id": running.run.id,
                    "attempt": running.run.attempt})
        written = ending.end(lambda: contextlib.nullcontext(conn), index, lost, now, bool(settings.operator_topic_arn))
        for status in written.statuses().values():
            if status in ended:
                ended[status] += 1
    if any(ended.values()):
        logger.warning("ended attempts whose executor never reported", extra=ended)
    if report is not None:
        report.retried, report.lost, report.unjudged = ended["retrying"], ended["lost"], unjudged
    return ended["retrying"], ended["lost"]


def judge_running(
    running: store.RunningAttempt, now: datetime, settings: Settings, uniform: retry.Random | None = None,
) -> ending.AttemptEnd | None:
    """None while the attempt's executor may still report; otherwise how the attempt ends (a retry jittered
    with `uniform` when given, as the executor's are)."""
    limit = (request_timeout_seconds(running.run.request, settings.max_request_timeout_seconds)
             + settings.lost_margin_seconds)
    if now < running.started_at + timedelta(seconds=limit):
        return None
    return ending.lost(running.run, running.started_at, now, limit, uniform)


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
