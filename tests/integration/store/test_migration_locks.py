"""No migration blocks the writers of the hot tables: each is applied, as a deploy applies it, to a database
holding history while writers insert and update `executions`, `attempts` and `jobs` as the poller, the
executors and the API do.

What is measured, per migration, with tickwork.store.migrate (the runner the deploy uses):
- the locks its transaction holds at its end (a trigger on schema_migrations reads pg_locks as the runner
  records the migration) and how long its session held or waited for each, sampled from pg_locks every few
  ms: any mode from SHARE up (SHARE, SHARE ROW EXCLUSIVE, EXCLUSIVE, ACCESS EXCLUSIVE) on a hot table stops
  its writers;
- whether it read or rewrote a hot table (pg_stat_user_tables.seq_scan, the table's relfilenode): a scan
  under such a lock (an index built without CONCURRENTLY, a constraint validated, a column with a CHECK)
  takes as long as the table is big, so it is found here whatever the size of this test's tables;
- the writers' longest wait.

The bound, BLOCK_BOUND_SECONDS = 1 s: every run is readied 1.5 to 2 s ahead of its instant (the lookahead),
with two writes on the way (the poller's insert of its row, the executor's start); a write held up less
than a second still leaves them time to be ready at the instant, a longer one makes runs late.

Migrations 0010-0019 were applied everywhere before this check existed; the ones that scan a hot table
under a blocking lock are listed in docs/deploy.md, and the first test checks the list (so it also shows
the check finds them). From 0020 on none may: the second test applies whatever files the tree holds.
Marked `upgrade` (make test-upgrade, once per CI run): it fills a database of its own first.
"""
from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import psycopg
import pytest

from tests.conftest import own_database
from tickwork.store.migrate import Migration, migrate, migration_files

pytestmark = pytest.mark.upgrade

BLOCK_BOUND_SECONDS = 1.0
HOT_TABLES = ("jobs", "executions", "attempts")
BLOCKING_MODES = ("ShareLock", "ShareRowExclusiveLock", "ExclusiveLock", "AccessExclusiveLock")
# The check starts from the schema before 0010 (the oldest migration docs/deploy.md speaks of).
FIRST_CHECKED = 10
# Enforced from here on; the ones before are only reported.
FIRST_ENFORCED = 20
# What the first test expects of 0010-0019: those that scan a hot table under a blocking lock.
KNOWN_BLOCKERS = {
    "0010_history_quota.sql": {"executions"},  # an index built in the transaction
    "0012_manual_runs.sql": {"executions"},  # a unique index built in the transaction
    "0013_job_keys.sql": {"jobs"},  # two partial indexes built in the transaction
    "0015_spread.sql": {"jobs"},  # ADD COLUMN with a CHECK: validated over every row, under ACCESS EXCLUSIVE
    "0016_calendars.sql": {"jobs"},  # a GIN index built in the transaction
    # The status CHECK validated and an index built over executions, while jobs and attempts are locked too.
    "0018_completion_callbacks.sql": {"executions", "jobs", "attempts"},
}
JOBS = 5_000
RUNS_PER_JOB = 40  # 200,000 executions, each with an attempt
SAMPLE_SECONDS = 0.005


def seq_uuid(n: int) -> str:
    return f"00000000-0000-4000-8000-{n:012x}"


@dataclass
class Verdict:
    name: str
    seconds: float
    locked: set[tuple[str, str]] = field(default_factory=set)  # (table, mode) its transaction held at its end
    held: dict[tuple[str, str], float] = field(default_factory=dict)  # (table, mode): seconds held or waited
    scanned: set[str] = field(default_factory=set)  # hot tables read whole or rewritten
    writer_wait: float = 0.0

    @property
    def blocked(self) -> set[str]:
        """Hot tables whose writers wait for as long as a hot table takes to read: those the transaction
        held a blocking lock on, when it also read one whole (its locks last until its commit). A step
        outside a transaction holds each statement's lock only for that statement (none is left at its end):
        there a scan is a concurrent build's, and only the time held counts."""
        return {table for table, _ in self.locked} if self.scanned else set()

    def longest_hold(self) -> float:
        return max(self.held.values(), default=0.0)

    def line(self) -> str:
        held = ", ".join(f"{table} {mode} {self.held.get((table, mode), 0) * 1000:.0f} ms"
                         for table, mode in sorted(self.locked | set(self.held)))
        return (f"{self.name:34} {self.seconds * 1000:7.0f} ms  writers' longest wait {self.writer_wait * 1000:5.0f} ms"
                f"  blocking locks: {held or 'none'}  scanned under them: {', '.join(sorted(self.blocked)) or '-'}")


class Writers:
    """The poller's inserts, the executors' starts and attempts, the API's job updates: each op timed."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.ops: list[tuple[float, float]] = []  # (began, took)
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._loop, args=(op,), daemon=True)
                         for op in (self._insert_run, self._start_run, self._update_job)]
        self.failures: list[BaseException] = []

    def __enter__(self) -> Writers:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)

    def longest_wait(self, began: float, ended: float) -> float:
        return max((took for start, took in list(self.ops) if start <= ended and start + took >= began), default=0.0)

    def _loop(self, op: Callable[[psycopg.Connection, random.Random], None]) -> None:
        rng = random.Random(op.__name__)
        try:
            with psycopg.connect(self.url, autocommit=True) as conn:
                while not self._stop.is_set():
                    began = time.monotonic()
                    op(conn, rng)
                    self.ops.append((began, time.monotonic() - began))
                    time.sleep(0.005)
        except BaseException as exc:  # a writer the new schema breaks fails the test
            self.failures.append(exc)

    def _insert_run(self, conn: psycopg.Connection, rng: random.Random) -> None:
        job = rng.randrange(JOBS)
        conn.execute("INSERT INTO executions (id, tenant_id, job_id, scheduled_for, trigger, status)"
                     " VALUES (gen_random_uuid(), %s, %s, clock_timestamp(), 'schedule', 'queued')",
                     (seq_uuid(1 + job % 10), seq_uuid(1_000 + job)))

    def _start_run(self, conn: psycopg.Connection, rng: random.Random) -> None:
        run = seq_uuid(100_000 + rng.randrange(JOBS * RUNS_PER_JOB))
        with conn.transaction():
            conn.execute("UPDATE executions SET status = 'running', attempt_count = attempt_count + 1,"
                         " started_at = now() WHERE id = %s", (run,))
            conn.execute("INSERT INTO attempts (execution_id, number, started_at, duration_ms)"
                         " SELECT id, attempt_count + 1000, now(), 1 FROM executions WHERE id = %s", (run,))

    def _update_job(self, conn: psycopg.Connection, rng: random.Random) -> None:
        conn.execute("UPDATE jobs SET next_run_at = now(), updated_at = now() WHERE id = %s",
                     (seq_uuid(1_000 + rng.randrange(JOBS)),))


class LockWatch:
    """Samples the locks one session holds or waits for on the hot tables, from a session of its own."""

    def __init__(self, url: str, pid: int) -> None:
        self.url, self.pid = url, pid
        self.seen: dict[tuple[str, str], tuple[float, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> LockWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def held(self) -> dict[tuple[str, str], float]:
        return {key: last - first + SAMPLE_SECONDS for key, (first, last) in self.seen.items()}

    def _sample(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self._stop.is_set():
                rows = conn.execute(
                    "SELECT c.relname, l.mode FROM pg_locks l JOIN pg_class c ON c.oid = l.relation"
                    " WHERE l.pid = %s AND l.locktype = 'relation' AND c.relname = ANY(%s) AND l.mode = ANY(%s)"
                    " AND c.relnamespace = 'public'::regnamespace",
                    (self.pid, list(HOT_TABLES), list(BLOCKING_MODES))).fetchall()
                now = time.monotonic()
                for table, mode in rows:
                    first, _ = self.seen.get((table, mode), (now, now))
                    self.seen[(table, mode)] = (first, now)
                time.sleep(SAMPLE_SECONDS)


def _scans(conn: psycopg.Connection, reader: psycopg.Connection) -> dict[str, tuple[int, int]]:
    """Each hot table's sequential scans so far and its file: the migrator's counts flushed first."""
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.execute("SELECT 1")  # the flush happens as the session goes idle
    reader.execute("SELECT pg_stat_clear_snapshot()")
    rows = reader.execute("SELECT relname, seq_scan, pg_relation_filenode(relid) FROM pg_stat_user_tables"
                          " WHERE relname = ANY(%s) AND schemaname = 'public'", (list(HOT_TABLES),)).fetchall()
    return {name: (scans, filenode) for name, scans, filenode in rows}


def apply_watched(url: str, conn: psycopg.Connection, reader: psycopg.Connection, writers: Writers,
                  files: list[Migration]) -> Verdict:
    """Apply the last of `files` (the ones before it are applied) while watching its locks and scans."""
    before = _scans(conn, reader)
    began = time.monotonic()
    with LockWatch(url, conn.info.backend_pid) as watch:
        applied = migrate(conn, files=files)
    ended = time.monotonic()
    assert applied == [files[-1].name]
    after = _scans(conn, reader)
    scanned = {table for table in HOT_TABLES if after[table] != before[table]}
    locked = reader.execute("SELECT relname, mode FROM migration_locks WHERE version = %s AND relname = ANY(%s)"
                            " AND mode = ANY(%s)", (files[-1].version, list(HOT_TABLES), list(BLOCKING_MODES)))
    return Verdict(files[-1].name, ended - began, set(locked.fetchall()), watch.held(), scanned,
                   writers.longest_wait(began, ended))


def _populate(conn: psycopg.Connection) -> None:
    """Tenants, jobs, and 200,000 runs with an attempt each, ids in order (b-tree appends, a quick fill)."""
    conn.execute("INSERT INTO tenants (id, name) SELECT " + _uuid_sql("n") + ", 't' || n FROM generate_series(1, 10) n")
    conn.execute("INSERT INTO jobs (id, tenant_id, name, schedule, request, retry, status, next_run_at) SELECT "
                 + _uuid_sql("1000 + n") + ", " + _uuid_sql("1 + mod(n, 10)")
                 + ", 'j' || n, '* * * * * *', '{}', '{}', 'active', now() FROM generate_series(0, %s) n", (JOBS - 1,))
    conn.execute("INSERT INTO executions (id, tenant_id, job_id, scheduled_for, trigger, status, attempt_count,"
                 " created_at, finished_at) SELECT " + _uuid_sql("100000 + j * %s + k") + ", "
                 + _uuid_sql("1 + mod(j, 10)") + ", " + _uuid_sql("1000 + j")
                 + ", now() - make_interval(secs => k + 10), 'schedule', 'succeeded', 1, now(), now()"
                 " FROM generate_series(0, %s) j, generate_series(0, %s) k", (RUNS_PER_JOB, JOBS - 1, RUNS_PER_JOB - 1))
    conn.execute("INSERT INTO attempts (execution_id, number, started_at, duration_ms, status_code)"
                 " SELECT id, 1, scheduled_for, 40, 200 FROM executions")
    for table in HOT_TABLES:
        # Autovacuum would queue ahead of a migration's lock request now and then (and be cancelled after
        # deadlock_timeout): a wait of the test's doing, not the migration's.
        conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
        conn.execute(f"ANALYZE {table}")


# The locks a migration's transaction holds at its end: those it took, all held until its commit. A step
# outside a transaction records itself after its statements, holding none.
NOTE_LOCKS = """
CREATE TABLE migration_locks (version integer, relname text, mode text);
CREATE FUNCTION note_migration_locks() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO migration_locks SELECT NEW.version, c.relname, l.mode
        FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
        WHERE l.pid = pg_backend_pid() AND l.locktype = 'relation' AND l.granted;
    RETURN NEW;
END $$;
CREATE TRIGGER note_migration_locks BEFORE INSERT ON schema_migrations
    FOR EACH ROW EXECUTE FUNCTION note_migration_locks();
"""


def _uuid_sql(expression: str) -> str:
    return f"('00000000-0000-4000-8000-' || lpad(to_hex({expression}), 12, '0'))::uuid"


@pytest.fixture(scope="module")
def history(servers: Any) -> Iterator[str]:
    """A database of its own (a concurrent index build waits for every older transaction of its database)
    at the schema before FIRST_CHECKED, holding history."""
    with own_database(servers.database_url, "tw_locks") as url:
        with psycopg.connect(url, autocommit=True) as conn:
            migrate(conn, files=[m for m in migration_files() if m.version < FIRST_CHECKED])
            conn.execute(NOTE_LOCKS)
            _populate(conn)
        yield url


# After every migration of the tree: the two ways to build an index on a hot table.
SAMPLES = [Migration(9998, "9998_concurrent_index.sql", "-- tickwork: no-transaction\n"
                     "CREATE INDEX CONCURRENTLY IF NOT EXISTS sample_concurrent ON executions (created_at, id);\n"),
           Migration(9999, "9999_plain_index.sql", "CREATE INDEX sample_plain ON executions (created_at, id)")]


@pytest.fixture(scope="module")
def verdicts(history: str) -> dict[str, Verdict]:
    """Every migration from FIRST_CHECKED on, in order, then SAMPLES, each applied under the writers, watched."""
    every = migration_files() + SAMPLES
    found: dict[str, Verdict] = {}
    with (psycopg.connect(history, autocommit=True) as conn, psycopg.connect(history, autocommit=True) as reader,
          Writers(history) as writers):
        time.sleep(0.5)  # the writers under way
        for position, migration in enumerate(every):
            if migration.version >= FIRST_CHECKED:
                found[migration.name] = apply_watched(history, conn, reader, writers, every[:position + 1])
        assert not writers.failures, writers.failures
        assert len(writers.ops) > 100
    print("\n" + "\n".join(verdict.line() for verdict in found.values()))
    return found


def test_an_index_built_concurrently_passes_and_one_built_in_the_transaction_does_not(
    verdicts: dict[str, Verdict],
) -> None:
    concurrent, plain = (verdicts[sample.name] for sample in SAMPLES)
    assert concurrent.scanned == {"executions"} and not concurrent.locked and not concurrent.held
    assert plain.blocked == {"executions"} and plain.locked == {("executions", "ShareLock")}


def verdict_version(name: str) -> int:
    return int(name.split("_", 1)[0])


def test_the_check_finds_the_old_migrations_that_blocked_writers(verdicts: dict[str, Verdict]) -> None:
    old = {name: verdict.blocked for name, verdict in verdicts.items() if verdict_version(name) < FIRST_ENFORCED}
    assert {name: tables for name, tables in old.items() if tables} == KNOWN_BLOCKERS


def test_no_migration_from_0020_blocks_writers(verdicts: dict[str, Verdict]) -> None:
    checked = {name: v for name, v in verdicts.items()
               if FIRST_ENFORCED <= verdict_version(name) < SAMPLES[0].version}
    print(f"\nchecked from {FIRST_ENFORCED:04d} on: {', '.join(checked) or 'none yet'}")
    for verdict in checked.values():
        assert not verdict.blocked, f"{verdict.name} scans a hot table under a blocking lock: {verdict.line()}"
        assert verdict.longest_hold() <= BLOCK_BOUND_SECONDS, verdict.line()
        assert verdict.writer_wait <= BLOCK_BOUND_SECONDS, verdict.line()
