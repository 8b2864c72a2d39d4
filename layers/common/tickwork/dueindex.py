"""The Redis due index: every Redis key and Lua script Tickwork uses lives in this module.

One sorted set holds everything due, scored by fire time in epoch milliseconds:
- `j:<job id>`: a live job, scored by its next slot. It is never removed to be re-added later: claiming
  it moves its score to the following slot in one atomic compare-and-set, so a crash delays a run but
  never loses the schedule.
- `e:<execution id>:<attempt>`: a one-shot dispatch of an existing execution (a retry, a manual run).
  Claiming removes it; Postgres still holds the execution, so the sweeper can put it back.
- `n:<notification id>:<attempt>`: the same for a notification attempt (tickwork.notifications).

A hash next to it holds each job's schedule spec so the poller can compute next slots without Postgres.
The set, the hash, the marker and the rebuild key of one shard share one hash tag, so the scripts also
run on a cluster-mode cache (ElastiCache Serverless); DUE_INDEX_SHARDS spreads jobs over several such
shards (tickwork.shards), each claimed and rebuilt on its own. The locks live under the base tag.

The marker key says the index is whole. When Redis loses it, the index is rebuilt from Postgres in
steps (tickwork.reconcile); the rebuild key holds how far it got, so the next step, in the next tick or
maintenance pass, goes on from there. Rebuilding never moves a score already in the set.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

from tickwork.models import Dispatch
from tickwork.shards import base_tag, check_count, member_shard, shard_of, shard_tags

JOB_PREFIX = "j:"
EXECUTION_PREFIX = "e:"
NOTIFICATION_PREFIX = "n:"

# The first element says whether the index marker exists: when it is gone (FLUSHALL, a failover to an
# empty replica) the index must be rebuilt from Postgres before anything is claimed. Then how many
# members are due in each of ARGV[4] whole seconds from ARGV[3] (ms) on, for the adaptive lookahead.
_FETCH_DUE = """
local items = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, ARGV[2])
local out = {redis.call('EXISTS', KEYS[3])}
for i = 0, tonumber(ARGV[4]) - 1 do
  local start = tonumber(ARGV[3]) + i * 1000
  out[#out + 1] = redis.call('ZCOUNT', KEYS[1], start, start + 999)
end
for i = 1, #items, 2 do
  local member = items[i]
  local spec = false
  if string.sub(member, 1, 2) == 'j:' then spec = redis.call('HGET', KEYS[2], string.sub(member, 3)) end
  out[#out + 1] = member
  out[#out + 1] = items[i + 1]
  out[#out + 1] = spec
end
return out
"""

# ARGV holds (member, expected score, new score or '' to remove) triples. A member whose score is not
# the one this poller read was claimed or rescheduled by someone else, and is left alone.
_CLAIM = """
local won = {}
for i = 1, #ARGV, 3 do
  local member = ARGV[i]
  local current = redis.call('ZSCORE', KEYS[1], member)
  if current and tonumber(current) == tonumber(ARGV[i + 1]) then
    if ARGV[i + 2] == '' then
      redis.call('ZREM', KEYS[1], member)
      if string.sub(member, 1, 2) == 'j:' then redis.call('HDEL', KEYS[2], string.sub(member, 3)) end
    else
      redis.call('ZADD', KEYS[1], ARGV[i + 2], member)
    end
    won[#won + 1] = 1
  else
    won[#won + 1] = 0
  end
end
return won
"""

# One page of a rebuild, applied only if the rebuild key still holds the position the page was read at:
# otherwise another rebuilder went on meanwhile, or Redis lost the key and the rebuild starts over.
# KEYS: due set, specs, rebuild key, marker. ARGV: position read, position after the page ('' when the
# rebuild is complete: the marker is set instead), built-at time, then as JSON arrays the job ids, their
# scores (strings: exact), the 1-based number of each one's spec among the distinct specs, and the ids
# of jobs to take out; then the distinct encoded specs. Few arguments and one variadic command per kind
# of write: per-argument and per-call costs are what a page of thousands of jobs pays.
# A job already in the set keeps its score (a claim made since Postgres was read) and a spec already
# there is kept (the API wrote it after this page was read); only a job added here gets this spec.
_REBUILD_PAGE = """
if redis.call('GET', KEYS[3]) ~= ARGV[1] then return -1 end
local ids, scores, spec_of = cjson.decode(ARGV[4]), cjson.decode(ARGV[5]), cjson.decode(ARGV[6])
local function chunked(command, key, args)
  for i = 1, #args, 4000 do redis.call(command, key, unpack(args, i, math.min(i + 3999, #args))) end
end
local members, new_scores, new_specs = {}, {}, {}
for i = 1, #ids do members[i] = 'j:' .. ids[i] end
for first = 1, #members, 4000 do
  local indexed = redis.call('ZMSCORE', KEYS[1], unpack(members, first, math.min(first + 3999, #members)))
  for k = 1, #indexed do
    local i = first + k - 1
    if indexed[k] then
      redis.call('HSETNX', KEYS[2], ids[i], ARGV[7 + spec_of[i]])
    else
      new_scores[#new_scores + 1] = scores[i]
      new_scores[#new_scores + 1] = members[i]
      new_specs[#new_specs + 1] = ids[i]
      new_specs[#new_specs + 1] = ARGV[7 + spec_of[i]]
    end
  end
end
chunked('ZADD', KEYS[1], new_scores)
chunked('HSET', KEYS[2], new_specs)
for _, id in ipairs(cjson.decode(ARGV[7])) do
  redis.call('ZREM', KEYS[1], 'j:' .. id)
  redis.call('HDEL', KEYS[2], id)
end
if ARGV[2] == '' then
  redis.call('SET', KEYS[4], ARGV[3])
  redis.call('DEL', KEYS[3])
else
  redis.call('SET', KEYS[3], ARGV[2])
end
return #new_specs / 2
"""

# Index jobs, each with its score unless already in the set, and its spec only if the one indexed is
# still the one the caller compared with ('' for none): never over a spec the API wrote meanwhile.
# ARGV: (job id, score, encoded spec, spec seen) per job. Returns how many specs were written.
_PUT_IF_UNCHANGED = """
local written = 0
for i = 1, #ARGV, 4 do
  redis.call('ZADD', KEYS[1], 'NX', ARGV[i + 1], 'j:' .. ARGV[i])
  if (redis.call('HGET', KEYS[2], ARGV[i]) or '') == ARGV[i + 3] then
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 2])
    written = written + 1
  end
end
return written
"""

# Take jobs out (member and spec); returns the ids whose member was in the set.
_TAKE_OUT = """
local removed = {}
for i = 1, #ARGV do
  if redis.call('ZREM', KEYS[1], 'j:' .. ARGV[i]) == 1 then removed[#removed + 1] = ARGV[i] end
  redis.call('HDEL', KEYS[2], ARGV[i])
end
return removed
"""

_RELEASE_LOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

# Note that a poller is ticking (KEYS[2], read by GET /health) and read the stored shard count (KEYS[3]); then
# take the tick lock (KEYS[1]) unless this second was already ticked (KEYS[4], when given): two tick loops
# side by side, or a duplicate execution, wake for the same second, and only the first of them works. The
# second is marked only by the poller that took the lock, so a tick kept out by another one still running
# leaves the second to a later arrival. Returns {1 if locked else 0, the shard count or false}.
_ACQUIRE_TICK = """
redis.call('SET', KEYS[2], ARGV[3])
local layout = redis.call('GET', KEYS[3])
if KEYS[4] and redis.call('EXISTS', KEYS[4]) == 1 then return {0, layout} end
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return {0, layout} end
if KEYS[4] then redis.call('SET', KEYS[4], ARGV[1], 'PX', ARGV[4]) end
return {1, layout}
"""
# How long a second's mark outlives it: far longer than any tick of that second can arrive late, and
# short-lived enough that the marks of an hour never pile up.
TICKED_SECOND_TTL_MS = 60_000


def encode_spec(spec: dict[str, Any]) -> str:
    return json.dumps(spec, separators=(",", ":"))


def job_member(job_id: str) -> str:
    return f"{JOB_PREFIX}{job_id}"


def execution_member(execution_id: str, attempt: int) -> str:
    return f"{EXECUTION_PREFIX}{execution_id}:{attempt}"


def notification_member(notification_id: str, attempt: int) -> str:
    return f"{NOTIFICATION_PREFIX}{notification_id}:{attempt}"


@dataclass(frozen=True)
class DueEntry:
    member: str
    score: int
    spec: dict[str, Any] | None

    @property
    def is_job(self) -> bool:
        return self.member.startswith(JOB_PREFIX)

    @property
    def job_id(self) -> str:
        return self.member[len(JOB_PREFIX):]

    @property
    def is_notification(self) -> bool:
        return self.member.startswith(NOTIFICATION_PREFIX)

    def execution(self) -> tuple[str, int]:
        """(execution or notification id, attempt) of a one-shot member."""
        execution_id, attempt = self.member[len(EXECUTION_PREFIX):].rsplit(":", 1)
        return execution_id, int(attempt)


@dataclass(frozen=True)
class Claim:
    member: str
    expected_score: int
    new_score: int | None  # None removes the member (one-shot dispatch, or a schedule with no more runs)


class Shard:
    """One hash tag's part of the due index (the whole index with one shard)."""

    def __init__(self, redis: Any, tag: str) -> None:
        self._redis = redis
        self.due_key = f"{tag}:due"
        self.specs_key = f"{tag}:specs"
        self.marker_key = f"{tag}:index-built"
        self.rebuild_key = f"{tag}:rebuild"
        self._fetch = redis.register_script(_FETCH_DUE)
        self._rebuild_page = redis.register_script(_REBUILD_PAGE)
        self._put_if_unchanged = redis.register_script(_PUT_IF_UNCHANGED)
        self._take_out = redis.register_script(_TAKE_OUT)
        self._claim = redis.register_script(_CLAIM)

    def keys(self) -> list[str]:
        return [self.due_key, self.specs_key, self.marker_key, self.rebuild_key]

    def fetch_due(self, max_score: int, limit: int) -> tuple[bool, list[DueEntry]]:
        """Whether the index is intact, and up to `limit` entries due by `max_score`, earliest first."""
        intact, entries, _ = self.fetch_due_counting(max_score, limit, 0, 0)
        return intact, entries

    def fetch_due_counting(
        self, max_score: int, limit: int, first_ms: int, seconds: int,
    ) -> tuple[bool, list[DueEntry], list[int]]:
        """`fetch_due`, and how many members are due in each of `seconds` whole seconds from `first_ms`."""
        flat = self._fetch(keys=[self.due_key, self.specs_key, self.marker_key],
                           args=[max_score, limit, first_ms, seconds])
        entries = []
        for i in range(1 + seconds, len(flat), 3):
            spec = json.loads(flat[i + 2]) if flat[i + 2] else None
            entries.append(DueEntry(flat[i], int(float(flat[i + 1])), spec))
        return bool(flat[0]), entries, [int(c) for c in flat[1:1 + seconds]]

    def count_due(self, max_score: int) -> int:
        """How many entries (jobs, retries, manual runs) are due by `max_score`: one ZCOUNT, O(log n)."""
        return int(self._redis.zcount(self.due_key, "-inf", max_score))

    def mark_built(self, built_at_ms: int) -> None:
        """Record that the index was rebuilt from Postgres: its absence later means Redis lost data."""
        self._redis.set(self.marker_key, built_at_ms)

    def is_built(self) -> bool:
        return bool(self._redis.exists(self.marker_key))

    def rebuild_position(self, start: str) -> str:
        """Where the rebuild in progress got to; `start` (and a rebuild begun) when none is."""
        pipe = self._redis.pipeline(transaction=False)
        pipe.set(self.rebuild_key, start, nx=True)
        pipe.get(self.rebuild_key)
        return str(pipe.execute()[1])

    def rebuild_page(
        self, read_at: str, following: str | None, puts: Sequence[tuple[str, int, str]], removals: Sequence[str],
        built_at_ms: int,
    ) -> int | None:
        """Apply one page of a rebuild read at position `read_at` and move on to `following` (None: the
        rebuild is complete, the marker is set). Returns how many jobs were added, None if refused
        because the rebuild is no longer at `read_at`."""
        distinct: dict[str, int] = {}
        spec_of = [distinct.setdefault(spec, len(distinct) + 1) for _, _, spec in puts]
        args = [read_at, following or "", built_at_ms, json.dumps([job_id for job_id, _, _ in puts]),
                json.dumps([str(score) for _, score, _ in puts]), json.dumps(spec_of), json.dumps(list(removals)),
                *distinct]
        added = int(self._rebuild_page(keys=[self.due_key, self.specs_key, self.rebuild_key, self.marker_key],
                                       args=args))
        return None if added < 0 else added

    def put_jobs_if_unchanged(self, entries: Sequence[tuple[str, int, str, str | None]]) -> int:
        """Index (job id, score, encoded spec, spec seen or None) entries: a score already in the set is
        kept, a spec is written only over the one seen. Returns how many specs were written."""
        if not entries:
            return 0
        args: list[Any] = []
        for job_id, score, spec, seen in entries:
            args += [job_id, score, spec, seen or ""]
        return int(self._put_if_unchanged(keys=[self.due_key, self.specs_key], args=args))

    def take_out(self, job_ids: Sequence[str]) -> list[str]:
        """Remove these jobs (member and spec); returns those that were in the set."""
        if not job_ids:
            return []
        return list(self._take_out(keys=[self.due_key, self.specs_key], args=list(job_ids)))

    def scan_jobs(self, cursor: int, count: int) -> tuple[int, list[str]]:
        """One ZSCAN step over the jobs in the set: (the cursor to go on from, 0 at the end; job ids)."""
        following, found = self._redis.zscan(self.due_key, cursor, match=JOB_PREFIX + "*", count=count)
        return int(following), [member[len(JOB_PREFIX):] for member, _ in found]

    def scan_executions(self, cursor: int, count: int) -> tuple[int, list[Dispatch]]:
        """One ZSCAN step over the one-shot dispatches in the set: (the cursor to go on from, 0 at the end;
        the dispatches)."""
        following, found = self._redis.zscan(self.due_key, cursor, match=EXECUTION_PREFIX + "*", count=count)
        dispatches = []
        for member, score in found:
            execution_id, attempt = DueEntry(member, int(score), None).execution()
            dispatches.append(Dispatch(execution_id, attempt, int(score)))
        return int(following), dispatches

    def claim(self, claims: Sequence[Claim]) -> list[bool]:
        """Atomically advance or remove each member still at its expected score; True where this caller won."""
        if not claims:
            return []
        args: list[Any] = []
        for c in claims:
            args += [c.member, c.expected_score, "" if c.new_score is None else c.new_score]
        return [bool(w) for w in self._claim(keys=[self.due_key, self.specs_key], args=args)]

    def put_job(
        self, job_id: str, spec: dict[str, Any], next_ms: int | None, pipeline: Any = None, keep_score: bool = False
    ) -> None:
        """Index a live job at its next slot (or drop it when it has none).

        keep_score leaves a job already in the set where it is (a rebuild must not rewind a live score).
        """
        if next_ms is None:
            self.remove_job(job_id, pipeline)
            return
        pipe = pipeline if pipeline is not None else self._redis.pipeline(transaction=True)
        pipe.hset(self.specs_key, job_id, encode_spec(spec))
        pipe.zadd(self.due_key, {job_member(job_id): next_ms}, nx=keep_score)
        if pipeline is None:
            pipe.execute()

    def remove_job(self, job_id: str, pipeline: Any = None) -> None:
        pipe = pipeline if pipeline is not None else self._redis.pipeline(transaction=True)
        pipe.zrem(self.due_key, job_member(job_id))
        pipe.hdel(self.specs_key, job_id)
        if pipeline is None:
            pipe.execute()

    def put_specs(self, specs: dict[str, dict[str, Any]]) -> None:
        """Restore specs the poller found missing (the sorted set survived, the hash field did not)."""
        if specs:
            encoded = {job_id: encode_spec(s) for job_id, s in specs.items()}
            self._redis.hset(self.specs_key, mapping=encoded)

    def schedule_execution(self, execution_id: str, attempt: int, due_ms: int, pipeline: Any = None) -> None:
        """Queue a one-shot dispatch of an existing execution (a retry or a manual run)."""
        target = pipeline if pipeline is not None else self._redis
        target.zadd(self.due_key, {execution_member(execution_id, attempt): due_ms})

    def schedule_notification(self, notification_id: str, attempt: int, due_ms: int, pipeline: Any = None) -> None:
        target = pipeline if pipeline is not None else self._redis
        target.zadd(self.due_key, {notification_member(notification_id, attempt): due_ms})

    def restore_notifications(self, attempts: Sequence[tuple[str, int, int]]) -> int:
        """Put back (id, attempt, due ms) notification dispatches missing from the set, as restore_executions."""
        if not attempts:
            return 0
        return int(self._redis.zadd(self.due_key, {notification_member(i, a): ms for i, a, ms in attempts}, nx=True))

    def job_ids(self, batch: int = 1000) -> Iterator[list[str]]:
        """Every job id in the due set, in batches (ZSCAN: never blocks Redis on a large set)."""
        cursor, found = self.scan_jobs(0, batch)
        while True:
            if found:
                yield found
            if cursor == 0:
                return
            cursor, found = self.scan_jobs(cursor, batch)

    def pipeline(self) -> Any:
        return self._redis.pipeline(transaction=False)

    def score(self, member: str) -> int | None:
        raw = self._redis.zscore(self.due_key, member)
        return None if raw is None else int(raw)

    def rewind_jobs(self, scores: Mapping[str, int]) -> int:
        """Move each job back to its given score where the indexed one is later; returns how many moved.

        A job not in the set stays out (it may have been paused since the caller read it), and no score
        ever moves forward. ZADD XX LT needs Redis/Valkey 6.2 or later.
        """
        if not scores:
            return 0
        members = {job_member(job_id): score for job_id, score in scores.items()}
        return int(self._redis.zadd(self.due_key, members, xx=True, lt=True, ch=True))

    def restore_executions(self, dispatches: Sequence[Dispatch]) -> int:
        """Put back one-shot dispatches missing from the set; returns how many were missing.

        One still in the set keeps its score: re-adding is safe to repeat every maintenance run.
        """
        if not dispatches:
            return 0
        members = {execution_member(d.execution_id, d.attempt): d.fire_at_ms for d in dispatches}
        return int(self._redis.zadd(self.due_key, members, nx=True))

    def job_states(self, job_ids: Sequence[str]) -> list[tuple[int | None, str | None]]:
        """Each job's score and encoded spec as indexed (None where missing), in one round trip."""
        if not job_ids:
            return []
        pipe = self._redis.pipeline(transaction=False)
        pipe.zmscore(self.due_key, [job_member(job_id) for job_id in job_ids])
        pipe.hmget(self.specs_key, list(job_ids))
        scores, specs = pipe.execute()
        return [(None if score is None else int(score), spec) for score, spec in zip(scores, specs)]


class DueIndex:
    """The due index of a deployment: its shards (tickwork.shards says which holds what) and the keys
    they share (the locks, the stored shard count). Writes go to the shard of the id they are about;
    reads that span the index visit every shard. With one shard, keys and round trips are those of a
    single-tag index."""

    def __init__(self, redis: Any, namespace: str = "tickwork", shards: int = 1) -> None:
        self._redis = redis
        self.namespace = namespace
        self.count = check_count(shards)
        self.shards = [Shard(redis, tag) for tag in shard_tags(namespace, self.count)]
        base = base_tag(namespace)
        self.tick_lock_key = f"{base}:tick-lock"
        self.maintenance_lock_key = f"{base}:maintenance-lock"
        self.layout_key = f"{base}:shards"  # the shard count the index was built for; absent: 1
        self.last_tick_key = f"{base}:last-tick"  # when a poller last ticked (GET /health reads it)
        self._base = base
        self._release = redis.register_script(_RELEASE_LOCK)
        self._acquire_tick = redis.register_script(_ACQUIRE_TICK)

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
        return DueIndex(self._redis, self.namespace, count)

    def _split(
        self, ids: Sequence[str], shard_fn: Callable[[str, int], int] = shard_of,
    ) -> list[tuple[Shard, list[int]]]:
        """Each shard with the positions in `ids` (job ids, or what `shard_fn` takes) of those it holds."""
        positions: dict[int, list[int]] = {}
        for i, entity in enumerate(ids):
            positions.setdefault(shard_fn(entity, self.count), []).append(i)
        return [(self.shards[shard], found) for shard, found in positions.items()]

    def fetch_due(self, max_score: int, limit: int) -> tuple[bool, list[DueEntry]]:
        """Whether every shard is intact, and up to `limit` entries due by `max_score` across them,
        earliest first. (The poller fetches shard by shard.)"""
        intact, entries = True, []
        for shard in self.shards:
            whole, found = shard.fetch_due(max_score, limit)
            intact, entries = intact and whole, entries + found
        return intact, sorted(entries, key=lambda e: e.score)[:limit]

    def claim(self, claims: Sequence[Claim]) -> list[bool]:
        won = [False] * len(claims)
        for shard, positions in self._split([c.member for c in claims], member_shard):
            for i, w in zip(positions, shard.claim([claims[i] for i in positions])):
                won[i] = w
        return won

    def mark_built(self, built_at_ms: int) -> None:
        for shard in self.shards:
            shard.mark_built(built_at_ms)

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

    def restore_notifications(self, attempts: Sequence[tuple[str, int, int]]) -> int:
        return sum(shard.restore_notifications([attempts[i] for i in positions])
                   for shard, positions in self._split([a[0] for a in attempts]))

    def job_ids(self, batch: int = 1000) -> Iterator[list[str]]:
        for shard in self.shards:
            yield from shard.job_ids(batch)

    def pipeline(self) -> Any:
        """A pipeline that may carry writes to several shards (never a transaction across them)."""
        return self._redis.pipeline(transaction=False)

    def score(self, member: str) -> int | None:
        return self.shard_of_member(member).score(member)

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

    def last_tick_ms(self) -> int | None:
        """When a poller last ticked (epoch ms, its own clock), None if none ever did since Redis was empty."""
        raw = self._redis.get(self.last_tick_key)
        return None if raw is None else int(raw)

    def count_due(self, max_score: int) -> int:
        """How many entries (jobs, retries, manual runs) are due by `max_score`, over every shard."""
        return sum(shard.count_due(max_score) for shard in self.shards)

    def store_layout(self) -> None:
        """Record this index's shard count as the one it is built for (one shard: no key, as ever)."""
        if self.count == 1:
            self._redis.delete(self.layout_key)
        else:
            self._redis.set(self.layout_key, self.count)

    def acquire_tick_lock(self, token: str, ttl_ms: int) -> bool:
        return self._acquire(self.tick_lock_key, token, ttl_ms)

    def release_tick_lock(self, token: str) -> bool:
        """Release only a lock this token still holds: a poller that overran its TTL frees nobody else's."""
        return self._release_held(self.tick_lock_key, token)

    def acquire_maintenance_lock(self, token: str, ttl_ms: int) -> bool:
        return self._acquire(self.maintenance_lock_key, token, ttl_ms)

    def release_maintenance_lock(self, token: str) -> bool:
        """Like the tick lock: a run that overran its TTL never frees the next run's lock."""
        return self._release_held(self.maintenance_lock_key, token)

    def _acquire(self, key: str, token: str, ttl_ms: int) -> bool:
        return bool(self._redis.set(key, token, nx=True, px=ttl_ms))

    def _release_held(self, key: str, token: str) -> bool:
        return bool(self._release(keys=[key], args=[token]))
