"""Each tenant's storage budget, held by the maintenance pass (tickwork.ops.maintenance, after retention): the
bytes of its audit entries and stored Idempotency-Key answers, noted as they are written and pruned
(tickwork.store.storage), against its max_storage_bytes (tickwork.tenant.quotas).

1. Fold the notes of every write and delete since the last pass into each tenant's usage.
2. Count afresh from their rows the tenants never counted, then those counted longest ago (at most
   RECOUNT_TENANTS a pass, each at most every RECOUNT_EVERY): what a release that knows nothing of the budget
   wrote or deleted is corrected so.
3. A tenant holding more Idempotency-Keys than max_idempotency_keys loses its oldest answered ones.
4. A tenant past its budget loses its oldest entries of both kinds, oldest first, down to LOW_WATER of it (so
   the next few writes do not bring it back at once). Only its own: no other tenant's entry is looked at.
5. Fold again: the usage read next shows what this pass deleted.

Nothing here refuses a write: a change or a delete is always recorded, and a tenant may pass its budget by
what it writes between two passes. Each tenant is handled on its own: one that fails is logged with its id and
the reason, and the pass goes on with the next.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Callable, Iterable, TypeVar

from aws_lambda_powertools import Logger

from tickwork.settings import Settings
from tickwork.store import storage as store
from tickwork.store.maintenance import Budget

logger = Logger(child=True)

# Notes folded per statement; the fold goes on until none is left or the pass's time is spent.
FOLD_BATCH = 10_000
# A recount reads every row of a tenant's: an hour between two of one tenant's keeps that a trickle, and
# 20 a pass recount 1,200 tenants an hour.
RECOUNT_EVERY = timedelta(hours=1)
RECOUNT_TENANTS = 20
# Pruned down to this share of the budget: room for the writes of a few passes before the next prune.
LOW_WATER = 0.9
# Entries looked at per statement when pruning a tenant.
PRUNE_BATCH = 1000

T = TypeVar("T")


@dataclass
class StorageReport:
    recounted: int = 0
    keys_capped: int = 0  # Idempotency-Keys deleted past max_idempotency_keys
    pruned: int = 0  # entries deleted past a tenant's budget
    failed: int = 0  # tenants whose step raised (logged)


def hold_budgets(conn: Any, settings: Settings, now: datetime, budget: Budget) -> StorageReport:
    """Steps 1 to 5 above, on an autocommit connection, within the retention's time budget (each step does
    some work at least)."""
    report = StorageReport()
    fold(conn, budget)
    report.recounted = _each(store.due_for_recount(conn, now - RECOUNT_EVERY, RECOUNT_TENANTS), budget, report,
                             lambda tenant_id: recount(conn, tenant_id, now), "recount")
    report.keys_capped = _each(store.over_key_count(conn, settings.max_idempotency_keys), budget, report,
                               lambda tenant_id: cap_keys(conn, tenant_id, settings.max_idempotency_keys, budget),
                               "idempotency key cap")
    report.pruned = _each(store.over_budget(conn, settings.max_storage_bytes), budget, report,
                          lambda usage: prune_to_budget(conn, usage, budget), "storage budget")
    fold(conn, budget)
    return report


def fold(conn: Any, budget: Budget) -> int:
    folded = 0
    while True:
        count = store.fold(conn, FOLD_BATCH)
        folded += count
        if count < FOLD_BATCH or budget.spent():
            return folded


def recount(conn: Any, tenant_id: str, now: datetime) -> int:
    store.reconcile(conn, tenant_id, now)
    return 1


def cap_keys(conn: Any, tenant_id: str, most: int, budget: Budget) -> int:
    """Delete the tenant's answered keys older than its newest `most`; returns how many went."""
    capped = store.cap_keys(conn, tenant_id, most, PRUNE_BATCH, budget)
    if capped:
        logger.info("deleted the oldest Idempotency-Keys past the tenant's cap",
                    extra={"tenant_id": tenant_id, "keys": capped, "max_idempotency_keys": most})
    return capped


def prune_to_budget(conn: Any, usage: store.Usage, budget: Budget) -> int:
    """Delete the tenant's oldest entries until it is at LOW_WATER of its budget; returns how many went."""
    excess = usage.bytes - int(usage.budget * LOW_WATER)
    pruned, freed = 0, 0
    while freed < excess:
        chosen = _oldest_covering(store.oldest(conn, usage.tenant_id, PRUNE_BATCH), excess - freed)
        deleted = store.delete(conn, usage.tenant_id, chosen) if chosen else 0
        if not deleted:
            break
        pruned += deleted
        freed += sum(entry.bytes for entry in chosen)
        if budget.spent():
            break
    logger.info("deleted the oldest audit entries and Idempotency-Keys past the tenant's storage budget",
                extra={"tenant_id": usage.tenant_id, "entries": pruned, "bytes": freed, "used": usage.bytes,
                       "max_storage_bytes": usage.budget})
    return pruned


def _oldest_covering(entries: list[store.Entry], wanted: int) -> list[store.Entry]:
    """The shortest prefix of `entries` (oldest first) whose bytes reach `wanted`, or all of them."""
    total = 0
    for count, entry in enumerate(entries, 1):
        total += entry.bytes
        if total >= wanted:
            return entries[:count]
    return entries


def _each(items: Iterable[T], budget: Budget, report: StorageReport, step: Callable[[T], int], name: str) -> int:
    """step(item) for each tenant's item until the time budget is spent (the first one whatever it is); a
    tenant that fails is logged and counted, and the others go on."""
    done = 0
    for item in items:
        try:
            done += step(item)
        except Exception as exc:  # one tenant's bad data must not stop the pass for the others
            report.failed += 1
            logger.exception(f"{name} failed for a tenant; going on with the others",
                             extra={"tenant_id": getattr(item, "tenant_id", item), "error_type": type(exc).__name__})
        if budget.spent():
            break
    return done
