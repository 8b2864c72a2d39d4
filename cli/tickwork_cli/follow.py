"""Which runs ended since the last look, for `tickwork runs tail`. No I/O: the command polls and prints."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

FINAL_STATUSES = frozenset({"succeeded", "failed", "skipped", "missed", "lost"})


@dataclass
class Follower:
    """Each run is reported once, when a poll first sees it in a final state. Runs that had ended
    before the first poll are history, not news: `start` marks them seen."""

    seen: set[str] = field(default_factory=set)

    def start(self, runs: Iterable[dict[str, Any]]) -> None:
        self.seen.update(run["id"] for run in runs if run["status"] in FINAL_STATUSES)

    def ended(self, runs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        """The runs of this poll that ended and were not reported yet, in the order they ended."""
        new = [run for run in runs if run["status"] in FINAL_STATUSES and run["id"] not in self.seen]
        self.seen.update(run["id"] for run in new)
        return sorted(new, key=lambda run: (run.get("finished_at") or "", run["id"]))
