"""A claimed batch's write, on a record thread of the tick: its won slots recorded in one statement (only the
inserted rows are dispatched), the runs its tenants' budgets admit (tickwork.dispatch.budget) handed to
executors. The record and the admission each serve the whole batch in one call; an item that makes one raise is
found by splitting the call and set aside (tickwork.dispatch.quarantine), and the others are written."""
from __future__ import annotations

from typing import Any, Sequence

from tickwork.dispatch.budget import Budgets
from tickwork.dispatch.quarantine import Quarantine, isolated
from tickwork.dispatch.result import TickResult
from tickwork.dueindex.entries import dispatch_member, job_member
from tickwork.interfaces import Invoker
from tickwork.models import Dispatch
from tickwork.rules.quarantine import Failure, Step, reason
from tickwork.store import executions as executions_store
from tickwork.store.executions import Recorded, RunTenant, Slot
from tickwork.timeutil import to_ms
from tickwork.vocab import DispatchKind

Fresh = dict[str, RunTenant]  # a run just written: its tenant, that tenant's budget override


class Recorder:
    def __init__(self, db: Any, invoker: Invoker, budgets: Budgets, quarantine: Quarantine) -> None:
        self.db = db  # psycopg_pool.ConnectionPool
        self.invoker = invoker
        self.budgets = budgets
        self.quarantine = quarantine

    def write(self, slots: list[Slot], dispatches: list[Dispatch], now_ms: int) -> TickResult:
        """Record `slots` (won claims of jobs), admit their runs and `dispatches` (won one-shots), invoke;
        returns what that counted for the tick."""
        part = TickResult(locked=True)
        failures: list[Failure] = []
        if slots or any(d.kind == DispatchKind.RUN for d in dispatches):
            with self.db.connection() as conn:
                fresh: Fresh = {}
                jobs: dict[str, str] = {}
                if slots:
                    recorded = self._record(conn, slots, part, failures)
                    dispatches = dispatches + [Dispatch(run.execution_id, 1, to_ms(run.slot)) for run in recorded.runs]
                    fresh, jobs = recorded.tenants, {run.execution_id: run.job_id for run in recorded.runs}
                dispatches = self._admit(conn, dispatches, now_ms, fresh, jobs, part, failures)
        part.quarantined = self.quarantine.set_aside(failures, now_ms)
        if dispatches:
            self.invoker.invoke(dispatches)
        part.dispatched = len(dispatches)
        return part

    def _record(self, conn: Any, slots: list[Slot], part: TickResult, failures: list[Failure]) -> Recorded:
        done = isolated(slots, lambda chunk: executions_store.record_claims(conn, list(chunk)))
        part.postgres_round_trips += done.calls
        failures += [
            Failure(job_member(slot.job_id), None if slot.next_run_at is None else to_ms(slot.next_run_at),
                    reason(Step.RECORD, error), job_id=slot.job_id)
            for slot, error in done.failed]
        runs = [run for chunk in done.results for run in chunk.runs]
        tenants = {run_id: tenant for chunk in done.results for run_id, tenant in chunk.tenants.items()}
        recorded = Recorded(runs, sum(chunk.missed for chunk in done.results), tenants)
        part.missed += recorded.missed
        return recorded

    def _admit(self, conn: Any, dispatches: Sequence[Dispatch], now_ms: int, fresh: Fresh, jobs: dict[str, str],
               part: TickResult, failures: list[Failure]) -> list[Dispatch]:
        """The dispatches within their tenants' runs in flight; the others are held back (budget.Budgets), and a
        dispatch whose admission raises is set aside, put back in the index at its retry."""
        done = isolated(dispatches, lambda chunk: self.budgets.admit(conn, chunk, now_ms, fresh))
        admitted = [d for chunk in done.results for d in chunk.dispatches]
        for chunk in done.results:
            part.delayed += chunk.delayed
            part.missed += chunk.missed
            part.postgres_round_trips += chunk.postgres_round_trips
            part.redis_round_trips += chunk.redis_round_trips
        failures += [
            Failure(dispatch_member(d), None, reason(Step.ADMIT, error), _tenant_of(fresh.get(d.execution_id)),
                    jobs.get(d.execution_id))
            for d, error in done.failed]
        return admitted


def _tenant_of(run: RunTenant | None) -> str | None:
    return run.tenant_id if run is not None else None
