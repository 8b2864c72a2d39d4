"""Move the due index to another shard count (DUE_INDEX_SHARDS changed across a deploy).

The poller reads the stored count with its tick lock; when it differs from its own, it switches
before claiming anything, under that lock:

1. the new layout's keys are cleared: whatever they hold (a layout used long ago, writes of a deploy
   still rolling out) is rebuilt from Postgres, so no score of an unknown age survives;
2. the one-shot dispatches (retries, manual runs) of the old layout are copied to their new shards with
   their scores: Postgres would give them back too, but only after the sweeper's delay;
3. the old layout's keys are deleted and the new count stored.

The new shards then have no marker, so the same tick goes on with the bounded rebuild of every shard
from Postgres (tickwork.dueindex.reconcile) and claims what is indexed so far. Nothing is lost: Postgres holds
every job's next unrecorded slot (a claim of the old layout not yet recorded is claimed again, and its
execution row, unique per (job, slot), is inserted once). Nothing runs twice: that same unique row is
the guard, whichever layout a slot was claimed from. Each step is safe to repeat, so a poller that dies
mid-way leaves the next tick to do it again.
"""
from __future__ import annotations

from dataclasses import dataclass

from aws_lambda_powertools import Logger

from tickwork.dueindex.index import DueIndex

logger = Logger(child=True)

SCAN_COUNT = 1000


@dataclass(frozen=True)
class Relayout:
    previous: int  # the shard count the index was laid out for
    carried: int  # one-shot dispatches copied to the new layout


def relayout(index: DueIndex, stored: int) -> Relayout:
    """Switch the deployment's index from `stored` shards to `index.count` (see the module docstring)."""
    old = index.with_shards(stored)
    _delete(index, [key for shard in index.shards for key in shard.keys()])
    carried = 0
    for shard in old.shards:
        cursor, found = shard.scan_executions(0, SCAN_COUNT)
        while True:
            carried += index.restore_executions(found)
            if cursor == 0:
                break
            cursor, found = shard.scan_executions(cursor, SCAN_COUNT)
    _delete(index, [key for shard in old.shards for key in shard.keys()])
    index.store_layout()
    logger.warning("due index shard count changed: rebuilding it from Postgres in the new layout",
                   extra={"previous": stored, "shards": index.count, "carried": carried})
    return Relayout(stored, carried)


def _delete(index: DueIndex, keys: list[str]) -> None:
    """One DEL per key in one pipeline: keys of different shards may live on different cluster nodes."""
    pipe = index.pipeline()
    for key in keys:
        pipe.delete(key)
    pipe.execute()
