"""A tenant's run history: its executions (newest slot first, kept after their job is deleted), an
execution's attempts, and a job's last notifications."""
from __future__ import annotations

from dataclasses import dataclass

from tickwork.models import Key, Page
from tickwork.rules.notifications import LIST_LIMIT
from tickwork.scope import Scope
from tickwork.store import history as history_store
from tickwork.store import jobs as jobs_store
from tickwork.store import notifications as notifications_store
from tickwork.store.filters import ExecutionFilter
from tickwork.store.history import AttemptRow, ExecutionRow
from tickwork.tenant.lookup import found, parse_id


def list_executions(scope: Scope, job_id: str, limit: int, before: Key | None) -> Page[ExecutionRow]:
    job_id = parse_id(job_id, "job")
    with scope.db.connection() as conn:
        found(jobs_store.get_job(conn, scope.tenant_id, job_id), "job")
        rows = history_store.list_executions(conn, scope.tenant_id, job_id, limit + 1, before)
    return Page.of(rows, limit, _slot_key)


def list_tenant_executions(
    scope: Scope, filters: ExecutionFilter, limit: int, before: Key | None,
) -> Page[ExecutionRow]:
    """Every execution of the tenant, newest slot first, deleted jobs' included. A filter is a query, not a
    lookup: a job id of another tenant (or of no job) matches nothing, exactly like a job without runs."""
    with scope.db.connection() as conn:
        rows = history_store.list_tenant_executions(conn, scope.tenant_id, filters, limit + 1, before)
    return Page.of(rows, limit, _slot_key)


def _slot_key(execution: ExecutionRow) -> Key:
    return execution.scheduled_for, execution.id


@dataclass(frozen=True)
class ExecutionRecord:
    """An execution with its attempts, first to last."""

    execution: ExecutionRow
    attempts: list[AttemptRow]


def get_execution(scope: Scope, execution_id: str) -> ExecutionRecord:
    """An execution with its attempts; kept (and shown) after its job is deleted."""
    execution_id = parse_id(execution_id, "execution")
    with scope.db.connection() as conn:
        execution = found(history_store.get_execution(conn, scope.tenant_id, execution_id), "execution")
        return ExecutionRecord(execution, history_store.list_attempts(conn, execution.id))


def job_notifications(scope: Scope, job_id: str) -> list[notifications_store.NotificationRow]:
    """The tenant's job's last notifications, newest first; NotFoundError for another tenant's job."""
    job_id = parse_id(job_id, "job")
    with scope.db.connection() as conn:
        found(jobs_store.get_job(conn, scope.tenant_id, job_id), "job")
        return notifications_store.list_for_job(conn, job_id, LIST_LIMIT)
