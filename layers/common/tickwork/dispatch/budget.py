"""The dispatch step's quota: each tenant's runs in flight (max_runs_in_flight, tickwork.tenant.quotas).

Runs past it are not handed to an executor: they stay recorded (`queued`, or `retrying` for a retry), with
the reason in their last_error, and their dispatch goes back in the due index a little later, as a retry's
does; the sweeper finds it there and leaves it alone. A first run of a schedule slot held back until its
job's catch-up policy would not run it any more is recorded `missed` (tickwork.rules.budget). Each attempt
dispatched holds a place (tickwork.dueindex.inflight) until its executor ends or the place lapses; every
decision is Postgres's rows and a Redis index that heals itself, so a crash delays a run and never loses it.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

from aws_lambda_powertools import Logger

from tickwork.dueindex.index import DueIndex
from tickwork.dueindex.inflight import InFlight, Seat
from tickwork.models import Dispatch
from tickwork.rules import budget
from tickwork.settings import Settings
from tickwork.store import budgets as store
from tickwork.store.budgets import WaitingRun
from tickwork.store.executions import RunTenant
from tickwork.timeutil import from_ms
from tickwork.vocab import DispatchKind

logger = Logger(child=True)


@dataclass
class Admitted:
    """What the budget let through (runs with their place, and what holds none: notifications, runs no longer
    waiting for the attempt dispatched), and what it cost."""

    dispatches: list[Dispatch] = field(default_factory=list)
    delayed: int = 0
    missed: int = 0
    postgres_round_trips: int = 0
    redis_round_trips: int = 0


@dataclass(frozen=True)
class _Refused:
    seat: Seat
    run: WaitingRun
    note: str


class Budgets:
    def __init__(self, settings: Settings, index: DueIndex, in_flight: InFlight) -> None:
        self.settings = settings
        self.index = index
        self.in_flight = in_flight

    def admit(self, conn: Any, dispatches: Sequence[Dispatch], now_ms: int,
              fresh: Mapping[str, RunTenant] | None = None) -> Admitted:
        """Give each run dispatched a place among its tenant's runs in flight, or hold it back. `fresh`: runs
        this tick has just written, waiting for their first attempt, with their tenant and its override of
        max_runs_in_flight (tickwork.store.executions.Recorded.tenants): nothing to read for them."""
        fresh = fresh or {}
        runs = [(d.execution_id, d.attempt) for d in dispatches if d.kind == DispatchKind.RUN]
        if not runs:
            return Admitted(list(dispatches))
        waiting = {(run_id, 1): WaitingRun(run_id, tenant.tenant_id, tenant.max_runs_in_flight, None, None)
                   for run_id, tenant in fresh.items()}
        others = [run for run in runs if run not in waiting]
        admitted = Admitted()
        if others:
            waiting.update(store.waiting_runs(conn, others))
            admitted.postgres_round_trips = 1
        seats: list[tuple[Seat, WaitingRun]] = []
        missed: list[tuple[Dispatch, str]] = []
        for d in dispatches:
            run = waiting.get((d.execution_id, d.attempt)) if d.kind == DispatchKind.RUN else None
            too_late = None if run is None or run.held is None else budget.missed_note(run.held, now_ms)
            if run is None:
                admitted.dispatches.append(d)
            elif too_late is not None:
                missed.append((d, too_late))
            else:
                seats.append((self._seat(d, run, now_ms), run))
        refused = self._take(seats, now_ms, admitted)
        self._hold_back(conn, refused, missed, now_ms, admitted)
        return admitted

    def _seat(self, dispatch: Dispatch, run: WaitingRun, now_ms: int) -> Seat:
        settings = self.settings
        quota = settings.max_runs_in_flight if run.budget_override is None else run.budget_override
        lapse = budget.lapse_ms(dispatch.fire_at_ms, now_ms, settings.max_request_timeout_seconds,
                                settings.lost_margin_seconds)
        return Seat(dispatch, run.tenant_id, quota, lapse)

    def _take(self, seats: list[tuple[Seat, WaitingRun]], now_ms: int, admitted: Admitted) -> list[_Refused]:
        """Take the places there are (one round trip); the seats refused, with the reason each will carry."""
        if not seats:
            return []
        taken, held = self.in_flight.take([seat for seat, _ in seats], now_ms)
        admitted.redis_round_trips += 1
        refused = []
        for (seat, run), got in zip(seats, taken):
            if got:
                admitted.dispatches.append(replace(seat.dispatch, tenant_id=seat.tenant_id))
            else:
                refused.append(_Refused(seat, run, budget.delay_note(held[seat.tenant_id], seat.budget)))
        return refused

    def _hold_back(self, conn: Any, refused: list[_Refused], missed: list[tuple[Dispatch, str]], now_ms: int,
                   admitted: Admitted) -> None:
        """Write why runs wait (or were missed), then put the waiting ones' dispatches back in the index."""
        if not refused and not missed:
            return
        notes = [store.Held(r.seat.dispatch.execution_id, r.seat.dispatch.attempt, False, r.note) for r in refused]
        notes += [store.Held(d.execution_id, d.attempt, True, note) for d, note in missed]
        recorded_missed = store.hold_back(conn, notes, from_ms(now_ms))
        admitted.postgres_round_trips += 1
        if refused:
            pipe = self.index.pipeline()
            for r in refused:
                due = budget.looked_at_again_ms(r.seat.dispatch.fire_at_ms, r.run.delayed_at_ms, now_ms)
                self.index.schedule_execution(r.seat.dispatch.execution_id, r.seat.dispatch.attempt, due,
                                                  pipeline=pipe)
            pipe.execute()
            admitted.redis_round_trips += 1
        admitted.delayed, admitted.missed = len(refused), len(recorded_missed)
        _report(refused, recorded_missed)


def _report(refused: list[_Refused], missed: list[str]) -> None:
    """One line per tenant held back (its runs' ids and its count), one for the runs recorded missed."""
    by_tenant: dict[str, list[_Refused]] = {}
    for r in refused:
        by_tenant.setdefault(r.seat.tenant_id, []).append(r)
    for tenant_id, held in by_tenant.items():
        logger.info("runs delayed: their tenant is at max_runs_in_flight", extra={
            "tenant_id": tenant_id, "execution_ids": [r.seat.dispatch.execution_id for r in held],
            "reason": held[0].note})
    if missed:
        logger.warning("runs held back past their job's catch-up policy recorded missed",
                       extra={"execution_ids": missed})
