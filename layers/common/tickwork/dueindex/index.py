"""The Redis due index: every Redis key and Lua script Tickwork uses lives in this module.

One sorted set holds everything due, scored by fire time in epoch milliseconds:
- `j:<job id>`: a live job, scored by its next slot. It is never removed to be re-added later: claiming
  it moves its score to the following slot in one atomic compare-and-set, so a crash delays a run but
  never loses the schedule.
- `e:<execution id>:<attempt>`: a one-shot dispatch of an existing execution (a retry, a manual run).
  Claiming removes it; Postgres still holds the execution, so the sweeper can put it back.
- `n:<notification id>:<attempt>`: the same for a notification attempt (tickwork.rules.notifications).
- `c:<execution id>:<attempt>`: the same for the check, at its deadline, of a run awaiting its completion
  callback (tickwork.rules.completion).

A hash next to it holds each job's schedule spec so the poller can compute next slots without Postgres;
another the failures in a row of members in quarantine (tickwork.dispatch.quarantine) that Postgres does not
count. The set, the hashes, the marker and the rebuild key of one shard share one hash tag, so the scripts also
run on a cluster-mode cache (ElastiCache Serverless); DUE_INDEX_SHARDS spreads jobs over several such
shards (tickwork.dueindex.shards), each claimed and rebuilt on its own. The locks live under the base tag.

Under the base tag too, a marker per job paused or deleted lately (`stopped:<job id>`, its status): the
executor reads those of a group's jobs at each instant, just before its writes, and holds back a run started
ahead of a pause (tickwork.runs.executor). It lives as long as such a run can still wait for its instant.

The marker key says the index is whole. When Redis loses it, the index is rebuilt from Postgres in
steps (tickwork.dueindex.reconcile); the rebuild key holds how far it got, so the next step, in the next tick or
maintenance pass, goes on from there. Rebuilding never moves a score already in the set.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator, Mapping, Sequence, cast

from tickwork.dueindex import lua
from tickwork.dueindex.entries import Claim, SetAside, Setting
from tickwork.dueindex.shard import Shard
from tickwork.dueindex.shards import base_tag, check_count, member_shard, shard_of, shard_tags
from tickwork.models import Dispatch

# How long a second's mark outlives it: far longer than any tick of that second can arrive late, and
# short-lived enough that the marks of an hour never pile up.
TICKED_SECOND_TTL_MS = 60_000
# How long a stopped job's mark lasts: past the latest instant of a run started before the pause (handed over
# at most the 10 s lookahead ahead, waited for at most 20 s: tickwork.runs.executor.MAX_EARLY_WAIT_SECONDS).
STOPPED_TTL_MS = 60_000


class DueIndex:
    """The due index of a deployment: its shards (tickwork.dueindex.shards says which holds what) and the keys
    they share (the locks, the stored shard count). Writes go to the shard of the id they are about;
    reads that span the index visit every shard. With one shard, keys and round trips are those of a
    single-tag index."""

    def __init__(self, redis: Any, namespace: str = "tickwork", shards: int = 1) -> None:
        self.redis = redis
        self.namespace = namespace
        self.count = check_count(shards)
        self.shards = [Shard(redis, tag) for tag in shard_tags(namespace, self.count)]
        base = base_tag(namespace)
        self.tick_lock_key = f"{base}:tick-lock"
        self.maintenance_lock_key = f"{base}:maintenance-lock"
        self.layout_key = f"{base}:shards"  # the shard count the index was built for; absent: 1
        self.last_tick_key = f"{base}:last-tick"  # when a poller last ticked (GET /health reads it)
        self._base = base
        self._release = redis.register_script(lua.RELEASE_LOCK)
        self._acquire_tick = redis.register_script(lua.ACQUIRE_TICK)

    # The first shard's keys: the whole index's with one shard.
    due_key = property(lambda self: self.shards[0].due_key)
    specs_key = property(lambda self: self.shards[0].specs_key)
    marker_key = property(lambda self: self.shards[0].marker_key)
    rebuild_key = property(lambda self: self.shards[0].rebuild_key)

    def shard_of_member(self, member: str) -> Shard:
        return self.shards[member_shard(member, self.count)]

    def shard_of_job(self, job_id: str) -> Shard:
        return self.shards[shard_of(job_id, self.count)]

    def number_of_job(self, job_id: str) -> int:
        return shard_of(job_id, self.count)

    def with_shards(self, count: int) -> DueIndex:
        """The same deployment's index laid out in `count` shards."""
        return DueIndex(self.redis, self.namespace, count)

    def _split(
        self, ids: Sequence[str], shard_fn: Callable[[str, int], int] = shard_of,
    ) -> list[tuple[Shard, list[int]]]:
        """Each shard with the positions in `ids` (job ids, or what `shard_fn` takes) of those it holds."""
        positions: dict[int, list[int]] = {}
        for i, entity in enumerate(ids):
            positions.setdefault(shard_fn(entity, self.count), []).append(i)
        return [(self.shards[shard], found) for shard, found in positions.items()]

    def claim(self, claims: Sequence[Claim]) -> list[bool]:
        won = [False] * len(claims)
        for shard, positions in self._split([c.member for c in claims], member_shard):
            for i, w in zip(positions, shard.claim([claims[i] for i in positions])):
                won[i] = w
        return won

    def set_aside(self, settings: Sequence[Setting], now_ms: int, steps: Sequence[int]) -> list[SetAside]:
        """Shard.set_aside over the shards of these members, in their order."""
        done: list[SetAside | None] = [None] * len(settings)
        for shard, positions in self._split([s.member for s in settings], member_shard):
            for i, aside in zip(positions, shard.set_aside([settings[i] for i in positions], now_ms, steps)):
                done[i] = aside
        return cast(list[SetAside], done)  # every position belongs to one shard

    def is_built(self) -> bool:
        return all(shard.is_built() for shard in self.shards)

    def unbuilt(self) -> list[int]:
        """The numbers of the shards whose marker is gone (one round trip per shard)."""
        return [n for n, shard in enumerate(self.shards) if not shard.is_built()]

    def put_jobs_if_unchanged(self, entries: Sequence[tuple[str, int, str, str | None]]) -> int:
        return sum(shard.put_jobs_if_unchanged([entries[i] for i in positions])
                   for shard, positions in self._split([e[0] for e in entries]))

    def take_out(self, job_ids: Sequence[str]) -> list[str]:
        return [found for shard, positions in self._split(job_ids)
                for found in shard.take_out([job_ids[i] for i in positions])]

    def put_job(
        self, job_id: str, spec: dict[str, Any], next_ms: int | None, pipeline: Any = None, keep_score: bool = False
    ) -> None:
        self.shard_of_job(job_id).put_job(job_id, spec, next_ms, pipeline, keep_score)

    def remove_job(self, job_id: str, pipeline: Any = None) -> None:
        self.shard_of_job(job_id).remove_job(job_id, pipeline)

    def schedule_execution(self, execution_id: str, attempt: int, due_ms: int, pipeline: Any = None) -> None:
        self.shards[shard_of(execution_id, self.count)].schedule_execution(execution_id, attempt, due_ms, pipeline)

    def schedule_notification(self, notification_id: str, attempt: int, due_ms: int, pipeline: Any = None) -> None:
        self.shards[shard_of(notification_id, self.count)].schedule_notification(
            notification_id, attempt, due_ms, pipeline)

    def schedule_completion_check(self, execution_id: str, attempt: int, due_ms: int, pipeline: Any = None) -> None:
        self.shards[shard_of(execution_id, self.count)].schedule_completion_check(execution_id, attempt, due_ms,
                                                                                  pipeline)

    def restore_notifications(self, attempts: Sequence[tuple[str, int, int]]) -> int:
        return sum(shard.restore_notifications([attempts[i] for i in positions])
                   for shard, positions in self._split([a[0] for a in attempts]))

    def job_ids(self, batch: int = 1000) -> Iterator[list[str]]:
        for shard in self.shards:
            yield from shard.job_ids(batch)

    def pipeline(self) -> Any:
        """A pipeline that may carry writes to several shards (never a transaction across them)."""
        return self.redis.pipeline(transaction=False)

    def rewind_jobs(self, scores: Mapping[str, int]) -> int:
        ids = list(scores)
        return sum(shard.rewind_jobs({ids[i]: scores[ids[i]] for i in positions})
                   for shard, positions in self._split(ids))

    def restore_executions(self, dispatches: Sequence[Dispatch]) -> int:
        return sum(shard.restore_executions([dispatches[i] for i in positions])
                   for shard, positions in self._split([d.execution_id for d in dispatches]))

    def job_states(self, job_ids: Sequence[str]) -> list[tuple[int | None, str | None]]:
        states: list[tuple[int | None, str | None]] = [(None, None)] * len(job_ids)
        for shard, positions in self._split(job_ids):
            for i, state in zip(positions, shard.job_states([job_ids[i] for i in positions])):
                states[i] = state
        return states

    def acquire_tick(self, token: str, ttl_ms: int, now_ms: int, second: int | None = None) -> tuple[bool, int]:
        """Note that a poller is ticking (GET /health reads it), take the tick lock and read the stored
        shard count, in one round trip. With `second` (epoch seconds), only if no poller ticked that second."""
        keys = [self.tick_lock_key, self.last_tick_key, self.layout_key]
        if second is not None:
            keys.append(self.ticked_second_key(second))
        won, stored = self._acquire_tick(keys=keys, args=[token, ttl_ms, now_ms, TICKED_SECOND_TTL_MS])
        return bool(won), int(stored or 1)

    def ticked_second_key(self, second: int) -> str:
        return f"{self._base}:ticked:{second}"

    def stopped_key(self, job_id: str) -> str:
        return f"{self._base}:stopped:{job_id}"

    def mark_stopped(self, job_id: str, status: str, pipeline: Any = None) -> None:
        """Note that a job was paused or deleted (`status`), once that is committed to Postgres."""
        (pipeline or self.redis).set(self.stopped_key(job_id), status, px=STOPPED_TTL_MS)

    def clear_stopped(self, job_id: str, pipeline: Any = None) -> None:
        """A job resumed: its runs go out again."""
        (pipeline or self.redis).delete(self.stopped_key(job_id))

    def stopped_jobs(self, job_ids: Sequence[str]) -> dict[str, str]:
        """Of these jobs, those paused or deleted lately, with their status (one round trip)."""
        ids = list(dict.fromkeys(job_ids))
        if not ids:
            return {}
        found = self.redis.mget([self.stopped_key(job_id) for job_id in ids])
        return {job_id: status for job_id, status in zip(ids, found) if status is not None}

    def last_tick_ms(self) -> int | None:
        """When a poller last ticked (epoch ms, its own clock), None if none ever did since Redis was empty."""
        raw = self.redis.get(self.last_tick_key)
        return None if raw is None else int(raw)

    def count_due(self, max_score: int) -> int:
        """How many entries (jobs, retries, manual runs) are due by `max_score`, over every shard."""
        return sum(shard.count_due(max_score) for shard in self.shards)

    def store_layout(self) -> None:
        """Record this index's shard count as the one it is built for (one shard: no key, as ever)."""
        if self.count == 1:
            self.redis.delete(self.layout_key)
        else:
            self.redis.set(self.layout_key, self.count)

    def release_tick_lock(self, token: str) -> bool:
        """Release only a lock this token still holds: a poller that overran its TTL frees nobody else's."""
        return self._release_held(self.tick_lock_key, token)

    def acquire_maintenance_lock(self, token: str, ttl_ms: int) -> bool:
        return self._acquire(self.maintenance_lock_key, token, ttl_ms)

    def release_maintenance_lock(self, token: str) -> bool:
        """Like the tick lock: a run that overran its TTL never frees the next run's lock."""
        return self._release_held(self.maintenance_lock_key, token)

    def _acquire(self, key: str, token: str, ttl_ms: int) -> bool:
        return bool(self.redis.set(key, token, nx=True, px=ttl_ms))

    def _release_held(self, key: str, token: str) -> bool:
        return bool(self._release(keys=[key], args=[token]))
