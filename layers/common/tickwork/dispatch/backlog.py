"""A tick's fair share of the backlog: due slots already later than the lateness tolerance (after an
outage, or while a tenant's `catchup: all` jobs replay their window).

On-time slots never wait behind backlog: the poller claims every slot due within the tolerance first,
then pages through the backlog oldest first, and each tenant has at most `per_tenant` backlog claims a
tick. A tenant past its share is passed over for the rest of the tick: its entries stay in the index at
their scores (nothing advanced, nothing lost) and the pages go on to the other tenants' entries behind
them (a `Cursor` past those passed over: no page re-reads them); the next tick gives every tenant a new
share. So one tenant's replay of a long window drains at its
share a tick, and neither delays another tenant's on-time runs nor takes another tenant's backlog turn.
Entries of a kind this release does not know (a newer release's) are passed over the same way, every tick.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Sequence

from tickwork.dueindex.entries import DueEntry

# The share of jobs whose index spec predates the tenant in it (maintenance rewrites those within a minute).
UNKNOWN_TENANT = ""


def tenant_of(entry: DueEntry) -> str | None:
    """The tenant whose share a backlog claim of this entry takes; None for what takes none: a one-shot
    dispatch (an attempt of a run already recorded, removed when claimed, so it cannot multiply) and a
    job whose spec is missing (the poller restores it rather than claiming it)."""
    if not entry.is_job or not entry.spec:
        return None
    return str(entry.spec.get("t") or UNKNOWN_TENANT)


class BacklogShares:
    """What each tenant has claimed of the backlog this tick; one per tick, shared by its shards' threads."""

    def __init__(self, per_tenant: int) -> None:
        self.per_tenant = per_tenant
        self._used: dict[str, int] = {}
        self._lock = threading.Lock()

    def take(self, entries: Sequence[DueEntry]) -> list[DueEntry]:
        """The entries of a backlog page (oldest first) this tick may claim, in order; the rest are passed over."""
        taken = []
        with self._lock:
            for entry in entries:
                tenant = tenant_of(entry)
                if not entry.is_known:
                    continue
                if tenant is None:
                    taken.append(entry)
                elif self._used.get(tenant, 0) < self.per_tenant:
                    self._used[tenant] = self._used.get(tenant, 0) + 1
                    taken.append(entry)
        return taken


@dataclass(frozen=True)
class Cursor:
    """Where a tick's next backlog page starts: at `score` (inclusive), past the first `passed` entries with
    that score, those the tick passed over. A claimed entry moves on to its next slot, so only those remain:
    every page costs O(log n + a page), however deep into the backlog it is."""

    score: int | str = "-inf"
    passed: int = 0

    def after(self, page: Sequence[DueEntry], taken: Sequence[DueEntry]) -> Cursor:
        """The cursor past `page` (non-empty, oldest first), of which `taken` were claimed."""
        claimed = {entry.member for entry in taken}
        return self.past(page, [entry for entry in page if entry.member not in claimed])

    def past(self, page: Sequence[DueEntry], left: Sequence[DueEntry]) -> Cursor:
        """The cursor past `page` (non-empty, oldest first), of which `left` stay where they are."""
        last = page[-1].score
        at_last = sum(1 for entry in left if entry.score == last)
        return Cursor(last, at_last + (self.passed if self.score == last else 0))
