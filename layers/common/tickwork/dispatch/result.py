"""What one poller tick did, counted (the tick's answer, its log line and its metrics)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class TickResult:
    locked: bool
    dispatched: int = 0
    claimed: int = 0
    batches: int = 0
    redis_round_trips: int = 0
    postgres_round_trips: int = 0
    rebuilt: bool = False  # a step of rebuilding the index ran (the marker was missing)
    reindexed: int = 0  # jobs that step put back
    rebuild_ms: int = 0  # how long that step took
    missed: int = 0  # slots recorded missed (catch-up policy, a lost claim, or held back too long)
    unplanned: int = 0  # fetched entries left due because the tick's planning budget ran out
    deferred: int = 0  # backlog entries passed over: their tenant had claimed its share, or of an unknown kind
    delayed: int = 0  # runs held back: their tenant was at max_runs_in_flight (tickwork.dispatch.budget)
    quarantined: int = 0  # entries whose handling raised, set aside (tickwork.dispatch.quarantine)
    unknown: int = 0  # on-time entries of kinds this release does not know, left where they are
    relayout_from: int | None = None  # the shard count this tick moved the index from

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def absorb(self, part: TickResult) -> None:
        """Add the counts of one shard's part of the tick."""
        for name in ("dispatched", "claimed", "batches", "redis_round_trips", "postgres_round_trips", "missed",
                     "unplanned", "deferred", "delayed", "quarantined", "unknown"):
            setattr(self, name, getattr(self, name) + getattr(part, name))
