"""Postgres plumbing: versioned migrations, each applied on its own, by one idempotent function.

A migration is a file `NNNN_name.sql` in tickwork/migrations, of one of three kinds, named by its first line:
- (no marker) a transaction: the file runs and is recorded in one transaction, so a failure or a timeout
  leaves nothing of it. Its statements wait at most the lock timeout for a lock; a migration that waited
  longer is rolled back and tried again after a pause, a few times.
- `-- tickwork: no-transaction`: statements that cannot run in a transaction, `CREATE INDEX CONCURRENTLY IF
  NOT EXISTS` above all, which builds an index without blocking writes. Each statement runs on its own; an
  INVALID index of the name a statement builds (what a build cut short by a timeout leaves) is dropped
  first, so a step cut short is simply run again. The file must say what one run already did (`IF NOT
  EXISTS`): it is recorded only once all its statements ran.
- `-- tickwork: batches`: one statement that changes at most one batch of rows not yet changed (a
  backfill: `UPDATE ... WHERE id IN (SELECT id ... WHERE new_column IS NULL LIMIT 5000)`), run again, each
  time in its own transaction, until it changes no row. What it did is committed batch by batch: cut short,
  it goes on from there the next time.

On a new database (no migration applied yet) every migration runs in one transaction, indexes built without
CONCURRENTLY: its tables are made by this very run, so no writer waits (and a concurrent build would wait
for every other transaction of the database); a failure leaves the database new.

Migrations run in order, each committed before the next starts, so a run cut short (the deploy's time ran
out) has kept every migration before the one it was in, and the next run (the next deploy, the next `make
dev`) goes on from there. A session advisory lock keeps two migrators of a schema apart; it is taken with
short tries, never waited for inside a transaction (a concurrent index build waits for every older
transaction, and would wait for a migrator queued on the lock while it holds it).
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from typing import Any, Callable, Sequence

from aws_lambda_powertools import Logger

from tickwork.errors import MigrationLockError

logger = Logger(child=True)

# The advisory lock that serializes the migrators of one schema (two cold starts, a deploy and `make dev`);
# those of the database's other schemas (the tests' own) go on. Advisory locks are the database's.
MIGRATION_LOCK_SQL = "hashtextextended('tickwork migrations ' || current_schema(), 0)"
# A statement waiting longer than this for a lock fails (and the migration is tried again): every writer
# queued behind a DDL statement's lock request waits at most this long. The deploy and `make dev` alike.
LOCK_TIMEOUT_SECONDS = 5.0
LOCK_RETRY_PAUSE_SECONDS = 2.0
# Tries after the first: a lock held by a long transaction is usually gone within a few of them.
LOCK_RETRIES = 3
# How often another migrator's lock is asked for again while it holds it.
MIGRATOR_POLL_SECONDS = 0.1
MARKER = "-- tickwork: "
_CONCURRENTLY = re.compile(r"\bINDEX\s+CONCURRENTLY\b", re.I)
_INDEX_BUILT = re.compile(r"CREATE\s+(?:UNIQUE\s+)?INDEX\s+CONCURRENTLY\s+IF\s+NOT\s+EXISTS\s+(\"?[\w.]+\"?)", re.I)
_CREATE_TABLE = ("CREATE TABLE IF NOT EXISTS schema_migrations ("
                 " version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())")


class StepKind(StrEnum):
    TRANSACTION = "transaction"
    NO_TRANSACTION = "no-transaction"
    BATCHES = "batches"


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    def __post_init__(self) -> None:
        _kind_of(self.sql)  # a file of an unknown kind is refused when it is read, before anything runs

    @property
    def kind(self) -> StepKind:
        return _kind_of(self.sql)

    def statements(self) -> list[str]:
        """The statements of a no-transaction step: each ends with `;` at the end of a line."""
        found = [part.strip() for part in re.split(r";[ \t]*(?:\n|$)", self.sql)]
        return [part for part in found if _without_comments(part)]


@dataclass(frozen=True)
class LockWaits:
    """How long a statement may wait for a lock, and how a migration that waited too long is tried again."""

    timeout_seconds: float = LOCK_TIMEOUT_SECONDS
    retries: int = LOCK_RETRIES
    pause_seconds: float = LOCK_RETRY_PAUSE_SECONDS


def migration_files() -> list[Migration]:
    folder = resources.files("tickwork") / "migrations"
    found = [Migration(int(entry.name.split("_", 1)[0]), entry.name, entry.read_text())
             for entry in folder.iterdir() if entry.name.endswith(".sql")]
    return sorted(found, key=lambda migration: migration.version)


def migrate(conn: Any, waits: LockWaits = LockWaits(), deadline: float | None = None,
            files: Sequence[Migration] | None = None, sleep: Callable[[float], None] = time.sleep) -> list[str]:
    """Apply every migration not applied yet, in order, each on its own; returns the names applied. On an
    autocommit connection. `deadline` (time.monotonic()): no try and no batch starts past it."""
    if not conn.autocommit:
        raise ValueError("migrate needs an autocommit connection: it commits each migration itself")
    todo = list(migration_files() if files is None else files)
    run = _Run(conn, waits, deadline, sleep)
    run.lock()
    try:
        conn.execute(_CREATE_TABLE)
        done = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
        pending = [migration for migration in todo if migration.version not in done]
        if not done:
            return run.all_at_once(pending)
        return [migration.name for migration in pending if run.apply(migration)]
    finally:
        run.unlock()


def _kind_of(sql: str) -> StepKind:
    first = sql.lstrip().split("\n", 1)[0].strip()
    if not first.startswith(MARKER):
        return StepKind.TRANSACTION
    kind = first[len(MARKER):].strip()
    if kind not in set(StepKind):
        raise ValueError(f"unknown migration kind {first!r}: one of {', '.join(MARKER + k for k in StepKind)}")
    return StepKind(kind)


def _without_comments(sql: str) -> str:
    return "\n".join(line for line in sql.splitlines() if not line.strip().startswith("--")).strip()


class _Run:
    """One migrator's session: its lock, its lock timeout, its tries."""

    def __init__(self, conn: Any, waits: LockWaits, deadline: float | None, sleep: Callable[[float], None]) -> None:
        self.conn, self.waits, self.deadline, self.sleep = conn, waits, deadline, sleep
        self.saved_lock_timeout = conn.execute("SHOW lock_timeout").fetchone()[0]

    def lock(self) -> None:
        """The migrators' lock, asked for again every MIGRATOR_POLL_SECONDS for at most the lock timeout,
        on every try."""
        for _ in self._tries("the migrators' lock (another migration is running)"):
            ends = time.monotonic() + self.waits.timeout_seconds
            while not self.conn.execute(f"SELECT pg_try_advisory_lock({MIGRATION_LOCK_SQL})").fetchone()[0]:
                if time.monotonic() >= ends:
                    break
                self.sleep(MIGRATOR_POLL_SECONDS)
            else:
                return

    def unlock(self) -> None:
        if not (self.conn.closed or self.conn.broken):
            self._set_lock_timeout(self.saved_lock_timeout)
            self.conn.execute(f"SELECT pg_advisory_unlock({MIGRATION_LOCK_SQL})")

    def apply(self, migration: Migration) -> bool:
        from psycopg import errors

        if not self._time_for(0):
            raise TimeoutError(f"no time left for {migration.name}: the next run goes on from it")
        step = {StepKind.TRANSACTION: self._in_transaction, StepKind.NO_TRANSACTION: self._outside_transaction,
                StepKind.BATCHES: self._in_batches}[migration.kind]
        for _ in self._tries(migration.name):
            try:
                step(migration)
                return True
            except errors.LockNotAvailable:
                pass
        return False  # not reached: _tries raises once they are spent

    def _tries(self, what: str) -> Any:
        """Yields once per try; raises MigrationLockError when they are spent, or the next one would not
        end before the deadline."""
        for attempt in range(self.waits.retries + 1):
            if attempt:
                if not self._time_for(self.waits.pause_seconds + self.waits.timeout_seconds):
                    break
                logger.warning("schema migration waited too long for a lock: trying again",
                               extra={"migration": what, "lock_timeout_seconds": self.waits.timeout_seconds,
                                      "attempt": attempt + 1})
                self.sleep(self.waits.pause_seconds)
            yield attempt
        raise MigrationLockError(f"{what} waited for a lock longer than {self.waits.timeout_seconds:g} s on "
                                 f"each of {attempt + 1} tries; the next run goes on from here")

    def _time_for(self, seconds: float) -> bool:
        return self.deadline is None or time.monotonic() + seconds < self.deadline

    def _set_lock_timeout(self, value: str) -> None:
        self.conn.execute("SELECT set_config('lock_timeout', %s, false)", (value,))

    def _in_transaction(self, migration: Migration) -> None:
        with self.conn.transaction():
            self.conn.execute("SELECT set_config('lock_timeout', %s, true)", (_ms(self.waits.timeout_seconds),))
            self.conn.execute(migration.sql)
            self._record(migration)

    def _outside_transaction(self, migration: Migration) -> None:
        # A concurrent build holds a lock no writer waits for, then waits for the transactions older than it:
        # no lock timeout (the statement timeout, if any, still bounds it), or every wait for a slow one
        # would leave an invalid index to build again.
        self._set_lock_timeout("0")
        try:
            for statement in migration.statements():
                if built := _INDEX_BUILT.search(statement):
                    self._drop_if_invalid(built.group(1))
                self.conn.execute(statement)
        finally:
            self._set_lock_timeout(self.saved_lock_timeout)
        self._record(migration)

    def all_at_once(self, pending: list[Migration]) -> list[str]:
        """A new database: every migration in one transaction, indexes built plainly (a batch step changes
        nothing: there are no rows yet)."""
        with self.conn.transaction():
            self.conn.execute("SELECT set_config('lock_timeout', %s, true)", (_ms(self.waits.timeout_seconds),))
            for migration in pending:
                plain = migration.statements() if migration.kind is StepKind.NO_TRANSACTION else [migration.sql]
                for statement in plain:
                    self.conn.execute(_CONCURRENTLY.sub("INDEX", statement))
                self._record(migration)
        return [migration.name for migration in pending]

    def _drop_if_invalid(self, index: str) -> None:
        invalid = self.conn.execute("SELECT 1 FROM pg_index WHERE indexrelid = to_regclass(%s) AND NOT indisvalid",
                                    (index,)).fetchone()
        if invalid:
            self.conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {index}")

    def _in_batches(self, migration: Migration) -> None:
        while True:
            with self.conn.transaction():
                self.conn.execute("SELECT set_config('lock_timeout', %s, true)", (_ms(self.waits.timeout_seconds),))
                changed = self.conn.execute(migration.sql).rowcount
            if changed <= 0:
                break
            if not self._time_for(0):
                raise TimeoutError(f"{migration.name} stopped between two batches at its deadline: the next run "
                                   "goes on from there")
        self._record(migration)

    def _record(self, migration: Migration) -> None:
        self.conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                          (migration.version, migration.name))


def _ms(seconds: float) -> str:
    return f"{max(0, int(seconds * 1000))}ms"
