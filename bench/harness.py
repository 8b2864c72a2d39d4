"""What every benchmark shares: a throw-away schema and key namespace, bulk jobs, a second-aligned
ticker, an invoker that notes when the poller let go of each dispatch, and log capture.

A Workspace is what tests/conftest.py gives a test: a fresh Postgres schema (migrated from scratch)
and a fresh Redis namespace, both dropped on exit, so a run never sees another run's rows or keys.
"""
from __future__ import annotations

import contextlib
import gc
import io
import json
import logging
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Iterator, Sequence
from urllib.parse import quote

import psycopg
import redis
from psycopg.types.json import Jsonb

from tickwork.dueindex import specs as dueindex_specs
from tickwork.dueindex.index import DueIndex
from tickwork.interfaces import Sender
from tickwork.models import Dispatch, dispatches_from_event
from tickwork.runs.executor import handle_event
from tickwork.settings import Settings
from tickwork.store import jobs as jobs_store
from tickwork.store.migrate import migrate
from tickwork.store.tenants import create_tenant, find_tenant
from tickwork.timeutil import from_ms
from tickwork.wiring import Services, build_services
from tickwork_local.executors import ThreadPoolInvoker

DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
# One pipeline round trip per this many jobs when indexing in bulk.
INDEX_CHUNK = 2000
# A daily cron: a job created due at some second fires there once and next tomorrow (a burst, once).
ONCE_A_DAY = "0 0 0 * * *"
EVERY_SECOND = "* * * * * *"
REQUEST_TIMEOUT_SECONDS = 5
# Far past any benchmark's runs at once (see Workspace).
BENCH_RUNS_IN_FLIGHT = 1_000_000


@dataclass(frozen=True)
class Servers:
    database_url: str = DEFAULT_DATABASE_URL
    redis_url: str = DEFAULT_REDIS_URL


def settle_heap() -> None:
    """Collect, then freeze what this process holds, before a benchmark starts.

    The process keeps the results of the benchmarks before (arrival records, lag lists): left to the
    collector, a full pass over them (160 ms for 2 million objects) lands in the next measured window.
    With executors in this process (as `make dev` runs) such pauses made a full run's in-process steady
    fall behind for good (p99 4.3 s, against 67 ms run on its own).
    """
    gc.collect()
    gc.freeze()


def _with_search_path(url: str, schema: str) -> str:
    option = quote(f"-csearch_path={schema}")
    return f"{url}{'&' if '?' in url else '?'}options={option}"


class Workspace:
    """A fresh schema and Redis namespace; `settings` points Tickwork at them. Dropped on exit."""

    def __init__(self, servers: Servers, label: str) -> None:
        suffix = uuid.uuid4().hex[:10]
        self.servers = servers
        self.schema = f"bench_{label}_{suffix}"
        self.namespace = f"tickwork-bench-{label}-{suffix}"
        self.database_url = _with_search_path(servers.database_url, self.schema)
        self._keys = tempfile.TemporaryDirectory(prefix="tickwork-bench-keys-")
        # One tenant makes every benchmark's runs (10,000 at one instant): the runs-in-flight quota, a bound
        # between tenants, is set past them so the bench still measures the engine (and pays for the places).
        self.settings = Settings(database_url=self.database_url, redis_url=servers.redis_url,
                                 namespace=self.namespace, allow_private_targets=True,
                                 key_file=f"{self._keys.name}/master.key", max_runs_in_flight=BENCH_RUNS_IN_FLIGHT)
        self.redis = redis.Redis.from_url(servers.redis_url, decode_responses=True)
        self._closers: list[Callable[[], None]] = []

    def __enter__(self) -> Workspace:
        settle_heap()
        with psycopg.connect(self.servers.database_url, autocommit=True) as admin:
            admin.execute(f'CREATE SCHEMA "{self.schema}"')
        with psycopg.connect(self.database_url, autocommit=True) as conn:
            migrate(conn)
        return self

    def __exit__(self, *exc: object) -> None:
        for close in reversed(self._closers):
            close()
        keys = list(self.redis.scan_iter(match="{" + self.namespace + "}:*", count=10_000))
        for i in range(0, len(keys), 10_000):
            self.redis.delete(*keys[i:i + 10_000])
        self.redis.close()
        with psycopg.connect(self.servers.database_url, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA "{self.schema}" CASCADE')
        self._keys.cleanup()

    def key(self, name: str) -> str:
        """A key inside this run's namespace (the baseline keeps its own keys here too)."""
        return "{" + self.namespace + "}:" + name

    def services(self, invoker: Any = None, db_pool_size: int = 4, sender: Sender | None = None) -> Services:
        svc = build_services(self.settings, invoker=invoker, db_pool_size=db_pool_size, sender=sender)
        self._closers.append(svc.close)
        return svc

    def connect(self) -> psycopg.Connection:
        return psycopg.connect(self.database_url, autocommit=True)


def request_for(url: str) -> dict[str, Any]:
    return {"method": "POST", "url": url, "headers": {"content-type": "application/json"},
            "body": '{"bench":true}', "timeout_seconds": REQUEST_TIMEOUT_SECONDS}


def insert_jobs(ws: Workspace, count: int, schedule: str, next_run_ms: int, url: str | Sequence[str], name: str,
                tenant: str = "bench") -> list[str]:
    """`count` active jobs of `tenant` in one INSERT ... SELECT (as the API would write them, minus the API);
    given several URLs, the jobs take them in turn."""
    urls = [url] if isinstance(url, str) else list(url)
    with ws.connect() as conn:
        tenant_id = find_tenant(conn, tenant) or create_tenant(conn, tenant)  # names are unique (0004)
        rows = conn.execute(
            "INSERT INTO jobs (id, tenant_id, name, schedule, timezone, request, retry, status, next_run_at)"
            " SELECT gen_random_uuid(), %s, %s || '-' || i, %s, 'UTC',"
            " jsonb_set(%s, '{url}', to_jsonb((%s::text[])[1 + i %% %s])), %s, 'active', %s"
            " FROM generate_series(1, %s) AS i RETURNING id::text",
            (tenant_id, name, schedule, Jsonb(request_for(urls[0])), urls, len(urls),
             Jsonb({"strategy": "fixed", "max_attempts": 1, "delay_seconds": 1}), from_ms(next_run_ms), count),
        ).fetchall()
    return [row[0] for row in rows]


def index_jobs(ws: Workspace, job_ids: Sequence[str], next_run_ms: int) -> None:
    """Index jobs that share one schedule: the first through dueindex_specs.index_job (the real path), the
    rest with the spec it produced, put_job in pipelines of INDEX_CHUNK (each job in its own shard)."""
    index = DueIndex(ws.redis, ws.namespace, ws.settings.due_index_shards)
    index.store_layout()  # else the first tick takes the index for one of another layout and clears it
    with ws.connect() as conn:
        first = jobs_store.get_jobs(conn, [job_ids[0]])[0]
    dueindex_specs.index_job(index, first)
    spec = json.loads(ws.redis.hget(index.shard_of_job(first.id).specs_key, first.id))
    for start in range(1, len(job_ids), INDEX_CHUNK):
        pipe = index.pipeline()
        for job_id in job_ids[start:start + INDEX_CHUNK]:
            index.put_job(job_id, spec, next_run_ms, pipeline=pipe)
        pipe.execute()
    mark_built(index, int(time.time() * 1000))


def create_jobs(ws: Workspace, count: int, schedule: str, next_run_ms: int, url: str | Sequence[str], name: str,
                tenant: str = "bench") -> list[str]:
    job_ids = insert_jobs(ws, count, schedule, next_run_ms, url, name, tenant)
    index_jobs(ws, job_ids, next_run_ms)
    return job_ids


# ---------------------------------------------------------------- time


def sleep_until(deadline: float, clock: Callable[[], float] = time.time) -> None:
    while (remaining := deadline - clock()) > 0:
        time.sleep(min(remaining, 0.05) if remaining > 0.06 else remaining)


def next_second(now: float | None = None) -> int:
    return int(now if now is not None else time.time()) + 1


@dataclass
class Tick:
    second: int  # the whole second this tick was meant for
    started: float  # epoch seconds
    seconds: float  # how long the tick function ran
    result: Any


@dataclass
class SecondTicker:
    """Calls `tick(now_ms)` at each whole second in [first, last], in one thread, like the local ticker.

    A tick that overran skips to the next whole second still ahead (ticks never bunch up), except that
    the last tick always runs, late if need be, so the slots of the measured window are all claimed.
    """

    tick: Callable[[int], Any]
    first: int
    last: int
    offset: float = 0.0  # seconds past each whole second (Tickwork's loop ticks half past)
    ticks: list[Tick] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._run, name="bench-ticker", daemon=True)

    def start(self) -> SecondTicker:
        self._thread.start()
        return self

    def join(self) -> None:
        self._thread.join(self.last - time.time() + 30)

    def _run(self) -> None:
        second = self.first
        while second <= self.last:
            sleep_until(second + self.offset)
            started = time.time()
            try:
                result = self.tick(int(started * 1000))
            except Exception as exc:  # a failed tick is a result to report, not a reason to stop the clock
                self.errors.append(exc)
                result = None
            self.ticks.append(Tick(second, started, time.time() - started, result))
            following = max(second + 1, int(time.time() - self.offset) + 1)
            second = self.last if second < self.last < following else following


# ---------------------------------------------------------------- executors


class TimedInvoker:
    """Wraps the real invoker: notes when the poller let go of dispatches, and counts them."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.handed = 0
        self.first_handed_at: float | None = None
        self.last_handed_at: float | None = None
        self._lock = threading.Lock()

    def invoke(self, dispatches: Sequence[Dispatch]) -> None:
        self.inner.invoke(dispatches)
        now = time.time()
        with self._lock:
            self.handed += len(dispatches)
            self.first_handed_at = self.first_handed_at or now
            self.last_handed_at = now

    def reset(self) -> None:
        with self._lock:
            self.handed, self.first_handed_at, self.last_handed_at = 0, None, None


class RecordingInvoker:
    """Keeps dispatches instead of running them: the poller measured alone."""

    def __init__(self) -> None:
        self.dispatches: list[Dispatch] = []

    def invoke(self, dispatches: Sequence[Dispatch]) -> None:
        self.dispatches.extend(dispatches)


class InProcessExecutors:
    """The executor Lambda simulated in-process: ThreadPoolInvoker running tickwork.runs.executor.handle_event
    against its own Services (its own connection pool, as a separate Lambda would have, and the local
    runtime's SharedSender: many invocations share this process, as in `make dev`)."""

    def __init__(self, svc: Services, workers: int) -> None:
        self.svc = svc
        self.runs_done = 0
        self.runs_started = 0
        self._lock = threading.Lock()
        self.pool = ThreadPoolInvoker(self._handle, max_workers=workers)

    def _handle(self, event: dict[str, Any], _context: Any) -> Any:
        dispatches = dispatches_from_event(event)
        with self._lock:
            self.runs_started += len(dispatches)
        try:
            return handle_event(self.svc, dispatches)
        finally:
            with self._lock:
                self.runs_done += len(dispatches)

    def invoke(self, dispatches: Sequence[Dispatch]) -> None:
        self.pool.invoke(dispatches)

    def spreading(self) -> contextlib.AbstractContextManager[None]:
        """One pool: nothing to spread a warm-up over (ProcessExecutors has several processes)."""
        return contextlib.nullcontext()

    def reset(self) -> None:
        with self._lock:
            self.runs_done = self.runs_started = 0

    def close(self) -> None:
        self.pool.shutdown(wait=False)


def wait_for(predicate: Callable[[], bool], timeout: float, step: float = 0.05) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


# ---------------------------------------------------------------- logs


class LogTally(logging.Handler):
    """Counts WARNING+ records by (logger, message) instead of printing them over the results table."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.counts: Counter[tuple[str, str]] = Counter()
        self.examples: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()[:120]
        self.counts[(record.name, message.split(":")[0] if "pool is full" in message else message)] += 1
        if record.exc_info and len(self.examples) < 3:
            self.examples.append(self.format(record))

    def summary(self) -> list[str]:
        return [f"{count} x {name}: {message}" for (name, message), count in self.counts.most_common(10)]

    def merge(self, counts: dict[tuple[str, str], int], examples: Sequence[str]) -> None:
        """Add another process's tally (bench/executors.py children send theirs at close)."""
        self.counts.update(counts)
        self.examples += list(examples)[:max(0, 3 - len(self.examples))]


class LineSink(io.TextIOBase):
    """Stands in for stdout while benchmarks run: the executor's metric lines (Powertools EMF) are still
    built and written, as in Lambda, but counted instead of flooding the terminal."""

    def __init__(self) -> None:
        self.lines = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.lines += text.count("\n")
        return len(text)


def capture_logs() -> LogTally:
    tally = LogTally()
    logging.basicConfig(level=logging.WARNING, handlers=[tally], force=True)
    return tally


# ---------------------------------------------------------------- statistics


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of unsorted values; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))
    return ordered[rank - 1]


def lag_summary(lags_ms: Sequence[float]) -> dict[str, float | None]:
    return {"p50": percentile(lags_ms, 50), "p99": percentile(lags_ms, 99),
            "max": max(lags_ms) if lags_ms else None, "min": min(lags_ms) if lags_ms else None, "n": len(lags_ms)}


def chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def parse_when(value: str) -> float:
    """Scheduled-for as the target received it: RFC 3339 (Tickwork) or epoch seconds (baseline)."""
    if value and value[0].isdigit() and "T" not in value:
        return float(value)
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def tick_stats(durations_seconds: Sequence[float], expected: int) -> dict[str, Any]:
    """How long ticks ran, and how many ran out of the `expected` (an overrun skips the next second)."""
    ms = [d * 1000 for d in durations_seconds]
    return {"count": len(ms), "expected": expected, "p50_ms": percentile(ms, 50), "max_ms": max(ms) if ms else None}


def mark_built(index: DueIndex, built_at_ms: int) -> None:
    """Every shard's marker set, as a finished rebuild sets it: the poller takes the index for whole."""
    for shard in index.shards:
        shard.redis.set(shard.marker_key, built_at_ms)
