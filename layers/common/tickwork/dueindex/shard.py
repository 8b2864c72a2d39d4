"""One hash tag's part of the due index: its sorted set of due members, its hash of job specs, its marker
(the index is whole), its rebuild position and its members' failures in a row (tickwork.dispatch.quarantine),
all under one tag so its scripts run on a cluster."""
from __future__ import annotations

import json
from typing import Any, Iterator, Mapping, Sequence

from aws_lambda_powertools import Logger

from tickwork.dueindex import lua
from tickwork.dueindex.entries import (
    EXECUTION_PREFIX,
    JOB_PREFIX,
    Claim,
    DueEntry,
    DuePage,
    SetAside,
    Setting,
    completion_member,
    encode_spec,
    execution_member,
    job_member,
    notification_member,
)
from tickwork.models import Dispatch

logger = Logger(child=True)


class Shard:
    """One hash tag's part of the due index (the whole index with one shard)."""

    def __init__(self, redis: Any, tag: str) -> None:
        self.redis = redis
        self.due_key = f"{tag}:due"
        self.specs_key = f"{tag}:specs"
        self.marker_key = f"{tag}:index-built"
        self.rebuild_key = f"{tag}:rebuild"
        self.failures_key = f"{tag}:failures"  # member -> failures in a row, of members not counted in Postgres
        self._fetch = redis.register_script(lua.FETCH_DUE)
        self._rebuild_page = redis.register_script(lua.REBUILD_PAGE)
        self._put_if_unchanged = redis.register_script(lua.PUT_IF_UNCHANGED)
        self._take_out = redis.register_script(lua.TAKE_OUT)
        self._claim = redis.register_script(lua.CLAIM)
        self._quarantine = redis.register_script(lua.QUARANTINE)

    def keys(self) -> list[str]:
        return [self.due_key, self.specs_key, self.marker_key, self.rebuild_key, self.failures_key]

    def fetch_due_counting(
        self, max_score: int, limit: int, first_ms: int, seconds: int,
    ) -> tuple[bool, list[DueEntry], list[int]]:
        """Whether the index is intact, up to `limit` entries due by `max_score` (earliest first), and how many
        members are due in each of `seconds` whole seconds from `first_ms`."""
        page = self.fetch_page(max_score, limit, first_ms, seconds)
        return page.intact, page.entries, page.counts

    def fetch_page(
        self, max_score: int | str, limit: int, first_ms: int = 0, seconds: int = 0, min_score: int | str = "-inf",
        offset: int = 0,
    ) -> DuePage:
        """Up to `limit` entries scored from `min_score` to `max_score` (ZRANGEBYSCORE bounds: "(" excludes),
        earliest first, past the first `offset`; with what fetch_due_counting says and the count below
        `min_score`, in one round trip."""
        flat = self._fetch(keys=[self.due_key, self.specs_key, self.marker_key],
                           args=[max_score, limit, first_ms, seconds, min_score, offset])
        entries = []
        for i in range(2 + seconds, len(flat), 3):
            spec = json.loads(flat[i + 2]) if flat[i + 2] else None
            entries.append(DueEntry(flat[i], int(float(flat[i + 1])), spec))
        return DuePage(bool(flat[0]), entries, [int(c) for c in flat[2:2 + seconds]], int(flat[1]))

    def count_due(self, max_score: int) -> int:
        """How many entries (jobs, retries, manual runs) are due by `max_score`: one ZCOUNT, O(log n)."""
        return int(self.redis.zcount(self.due_key, "-inf", max_score))

    def is_built(self) -> bool:
        return bool(self.redis.exists(self.marker_key))

    def rebuild_position(self, start: str) -> str:
        """Where the rebuild in progress got to; `start` (and a rebuild begun) when none is."""
        pipe = self.redis.pipeline(transaction=False)
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
        following, found = self.redis.zscan(self.due_key, cursor, match=JOB_PREFIX + "*", count=count)
        return int(following), [member[len(JOB_PREFIX):] for member, _ in found]

    def scan_executions(self, cursor: int, count: int) -> tuple[int, list[Dispatch]]:
        """One ZSCAN step over the one-shot dispatches in the set: (the cursor to go on from, 0 at the end;
        the dispatches)."""
        following, found = self.redis.zscan(self.due_key, cursor, match=EXECUTION_PREFIX + "*", count=count)
        dispatches = []
        for member, score in found:
            try:
                execution_id, attempt = DueEntry(member, int(score), None).execution()
            except ValueError:  # not ours to read: the poller quarantines it (tickwork.dispatch.quarantine)
                logger.warning("a malformed one-shot member of the due index is left where it is",
                               extra={"member": member[:80]})
                continue
            dispatches.append(Dispatch(execution_id, attempt, int(score)))
        return int(following), dispatches

    def claim(self, claims: Sequence[Claim]) -> list[bool]:
        """Atomically advance or remove each member still at its expected score; True where this caller won."""
        if not claims:
            return []
        args: list[Any] = []
        for c in claims:
            args += [c.member, c.expected_score, "" if c.new_score is None else c.new_score]
        return [bool(w) for w in self._claim(keys=[self.due_key, self.specs_key, self.failures_key], args=args)]

    def set_aside(self, settings: Sequence[Setting], now_ms: int, steps: Sequence[int]) -> list[SetAside]:
        """Move each member out of the claimable range to `now_ms` + steps[its failures in a row - 1] (the last
        step for any count past them), atomically, as a claim moves one (lua.QUARANTINE)."""
        if not settings:
            return []
        args: list[Any] = [now_ms, len(steps), *steps]
        for s in settings:
            args += [s.member, "" if s.expected_score is None else s.expected_score,
                     "" if s.failures is None else s.failures]
        flat = self._quarantine(keys=[self.due_key, self.failures_key], args=args)
        return [SetAside(int(flat[i]), int(flat[i + 1]), bool(flat[i + 2])) for i in range(0, len(flat), 3)]

    def put_job(
        self, job_id: str, spec: dict[str, Any], next_ms: int | None, pipeline: Any = None, keep_score: bool = False
    ) -> None:
        """Index a live job at its next slot (or drop it when it has none).

        keep_score leaves a job already in the set where it is (a rebuild must not rewind a live score).
        """
        if next_ms is None:
            self.remove_job(job_id, pipeline)
            return
        pipe = pipeline if pipeline is not None else self.redis.pipeline(transaction=True)
        pipe.hset(self.specs_key, job_id, encode_spec(spec))
        pipe.zadd(self.due_key, {job_member(job_id): next_ms}, nx=keep_score)
        if pipeline is None:
            pipe.execute()

    def remove_job(self, job_id: str, pipeline: Any = None) -> None:
        pipe = pipeline if pipeline is not None else self.redis.pipeline(transaction=True)
        pipe.zrem(self.due_key, job_member(job_id))
        pipe.hdel(self.specs_key, job_id)
        if pipeline is None:
            pipe.execute()

    def schedule_execution(self, execution_id: str, attempt: int, due_ms: int, pipeline: Any = None) -> None:
        """Queue a one-shot dispatch of an existing execution (a retry or a manual run)."""
        target = pipeline if pipeline is not None else self.redis
        target.zadd(self.due_key, {execution_member(execution_id, attempt): due_ms})

    def schedule_notification(self, notification_id: str, attempt: int, due_ms: int, pipeline: Any = None) -> None:
        target = pipeline if pipeline is not None else self.redis
        target.zadd(self.due_key, {notification_member(notification_id, attempt): due_ms})

    def schedule_completion_check(self, execution_id: str, attempt: int, due_ms: int, pipeline: Any = None) -> None:
        """Queue the check of a run awaiting its completion callback, at its deadline."""
        target = pipeline if pipeline is not None else self.redis
        target.zadd(self.due_key, {completion_member(execution_id, attempt): due_ms})

    def restore_notifications(self, attempts: Sequence[tuple[str, int, int]]) -> int:
        """Put back (id, attempt, due ms) notification dispatches missing from the set, as restore_executions."""
        if not attempts:
            return 0
        return int(self.redis.zadd(self.due_key, {notification_member(i, a): ms for i, a, ms in attempts}, nx=True))

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
        return self.redis.pipeline(transaction=False)

    def rewind_jobs(self, scores: Mapping[str, int]) -> int:
        """Move each job back to its given score where the indexed one is later; returns how many moved.

        A job not in the set stays out (it may have been paused since the caller read it), and no score
        ever moves forward. ZADD XX LT needs Redis/Valkey 6.2 or later.
        """
        if not scores:
            return 0
        members = {job_member(job_id): score for job_id, score in scores.items()}
        return int(self.redis.zadd(self.due_key, members, xx=True, lt=True, ch=True))

    def restore_executions(self, dispatches: Sequence[Dispatch]) -> int:
        """Put back one-shot dispatches missing from the set; returns how many were missing.

        One still in the set keeps its score: re-adding is safe to repeat every maintenance run.
        """
        if not dispatches:
            return 0
        members = {execution_member(d.execution_id, d.attempt): d.fire_at_ms for d in dispatches}
        return int(self.redis.zadd(self.due_key, members, nx=True))

    def job_states(self, job_ids: Sequence[str]) -> list[tuple[int | None, str | None]]:
        """Each job's score and encoded spec as indexed (None where missing), in one round trip."""
        if not job_ids:
            return []
        pipe = self.redis.pipeline(transaction=False)
        pipe.zmscore(self.due_key, [job_member(job_id) for job_id in job_ids])
        pipe.hmget(self.specs_key, list(job_ids))
        scores, specs = pipe.execute()
        return [(None if score is None else int(score), spec) for score, spec in zip(scores, specs)]
