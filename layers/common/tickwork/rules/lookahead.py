"""How far ahead a tick claims: the base lookahead, and further for the instants many runs share.

A run claimed ahead reaches its executor early enough to be readied (start row, connection, rendered
request) before its instant, so the instant itself costs only the writes. At normal load the base
lookahead (1.5 s) is enough. A heavy instant (everyone's job at 00:00:00) needs time in proportion to
its runs: each whole second past the base horizon gets a lead of the base plus its runs divided by how
many runs the executors ready per second, capped at the maximum lookahead. A second whose lead has
begun is claimed whole, with every second before it. Pure: `now` and the counts are passed in.
"""
from __future__ import annotations

from typing import Sequence

SECOND_MS = 1000


def seconds_ahead(now_ms: int, base_ms: int, max_ms: int) -> tuple[int, int]:
    """The whole seconds worth counting: (the start of the first one past the base horizon, how many
    start before the maximum lookahead ends)."""
    first = (now_ms + base_ms) // SECOND_MS * SECOND_MS + SECOND_MS
    count = max(0, (now_ms + max_ms - first) // SECOND_MS + 1)
    return first, count


def horizon_ms(
    now_ms: int, base_ms: int, max_ms: int, runs_per_second: int, first_ms: int, counts: Sequence[int],
    spread: int = 1,
) -> int:
    """The score up to which a tick claims. `counts[i]`: runs due in the second starting at
    first_ms + i s, in one of `spread` shards that share the load evenly."""
    horizon = now_ms + base_ms
    for i, runs in enumerate(counts):
        start = first_ms + i * SECOND_MS
        lead = min(max_ms, base_ms + runs * spread * SECOND_MS // max(1, runs_per_second))
        if runs and start - now_ms <= lead:
            horizon = start + SECOND_MS - 1
    return horizon
