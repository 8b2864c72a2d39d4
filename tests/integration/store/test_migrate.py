"""The migration runner (tickwork.store.migrate) on real PostgreSQL: each migration on its own, a lock timeout
with tries, steps outside a transaction (concurrent index builds) and backfills in resumable batches."""
from __future__ import annotations

import threading
import time
from typing import Any, Iterator

import psycopg
import pytest

from tests.conftest import _with_search_path, fresh_schema
from tests.conftest import own_database as own_database_at
from tickwork.errors import MigrationLockError
from tickwork.store.migrate import LockWaits, Migration, migrate

QUICK = LockWaits(timeout_seconds=0.3, retries=20, pause_seconds=0.2)
TABLE = Migration(1, "0001_table.sql", "CREATE TABLE t (id int PRIMARY KEY, a int); "
                                       "INSERT INTO t SELECT n, NULL FROM generate_series(1, 10) AS n")


@pytest.fixture
def conn(servers: Any) -> Iterator[psycopg.Connection]:
    """An empty schema of the shared test database, as a new stack's."""
    with fresh_schema(servers.database_url) as url, psycopg.connect(url, autocommit=True) as connection:
        yield connection


@pytest.fixture
def own_database(servers: Any) -> Iterator[str]:
    """A database of its own: a concurrent index build waits for every older transaction of its database,
    and the shared one has other tests' transactions."""
    with own_database_at(servers.database_url) as url:
        yield url


def _applied(conn: psycopg.Connection) -> list[str]:
    return [row[0] for row in conn.execute("SELECT name FROM schema_migrations ORDER BY version")]


def _holding_share_lock(url: str, table: str, seconds: float) -> threading.Thread:
    """Another session reading `table` in a transaction open for `seconds`: ALTER TABLE waits for it."""
    started = threading.Event()

    def hold() -> None:
        with psycopg.connect(url) as other, other.transaction():
            other.execute(f"SELECT count(*) FROM {table}")
            started.set()
            time.sleep(seconds)

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    started.wait(10)
    return holder


def _columns(conn: psycopg.Connection) -> set[str]:
    return {row[0] for row in conn.execute("SELECT column_name FROM information_schema.columns"
                                           " WHERE table_schema = current_schema() AND table_name = 't'")}


def test_each_migration_commits_on_its_own_and_a_failure_keeps_those_before_it(conn: psycopg.Connection) -> None:
    migrate(conn, files=[TABLE])
    added = Migration(2, "0002_b.sql", "ALTER TABLE t ADD COLUMN b int")
    broken = Migration(3, "0003_broken.sql", "ALTER TABLE t ADD COLUMN c int; SELECT no_such_function()")
    with pytest.raises(psycopg.errors.UndefinedFunction):
        migrate(conn, files=[TABLE, added, broken])
    assert _applied(conn) == ["0001_table.sql", "0002_b.sql"]
    assert _columns(conn) == {"id", "a", "b"}  # nothing of the failed one
    fixed = Migration(3, "0003_fixed.sql", "ALTER TABLE t ADD COLUMN c int")
    assert migrate(conn, files=[TABLE, added, fixed]) == ["0003_fixed.sql"]  # the next run goes on from there


def test_a_new_database_is_migrated_in_one_transaction(conn: psycopg.Connection) -> None:
    """No writer and no row to keep going: one commit (the suite's every test, a new stack), and a failure
    leaves the database new."""
    broken = Migration(2, "0002_broken.sql", "ALTER TABLE t ADD COLUMN b int; SELECT no_such_function()")
    with pytest.raises(psycopg.errors.UndefinedFunction):
        migrate(conn, files=[TABLE, broken])
    assert _applied(conn) == []
    assert migrate(conn, files=[TABLE, BACKFILL]) == ["0001_table.sql", "0002_backfill.sql"]


def test_every_migration_runs_with_the_lock_timeout_by_default(conn: psycopg.Connection) -> None:
    """The local runtime calls migrate(conn) as the deploy does: a DDL statement queued behind a long
    transaction holds writers up for 5 s at most, in `make dev` too."""
    probe = Migration(1, "0001_probe.sql", "CREATE TABLE seen AS SELECT current_setting('lock_timeout') AS value")
    migrate(conn, files=[probe])
    assert conn.execute("SELECT value FROM seen").fetchone()[0] == "5s"
    assert conn.execute("SHOW lock_timeout").fetchone()[0] == "0"  # the session's own is left as it was


def test_a_lock_held_longer_than_the_timeout_is_tried_again_and_writers_wait_no_longer(
    conn: psycopg.Connection, servers: Any,
) -> None:
    """Break: a transaction reads the table for 2.5 s while the migration alters it. Must hold: the ALTER
    waits at most its lock timeout per try (0.3 s), so a writer queued behind it waits no longer than that
    (without the timeout it waits until the reader ends); the migration is applied once the reader is gone."""
    migrate(conn, files=[TABLE])
    url = _with_search_path(servers.database_url, conn.execute("SELECT current_schema()").fetchone()[0])
    holder = _holding_share_lock(url, "t", 2.5)
    waits: list[float] = []
    stop = threading.Event()

    def write() -> None:
        with psycopg.connect(url, autocommit=True) as writer:
            while not stop.is_set():
                began = time.monotonic()
                writer.execute("UPDATE t SET a = coalesce(a, 0) + 1 WHERE id = 1")
                waits.append(time.monotonic() - began)
                time.sleep(0.01)

    writing = threading.Thread(target=write, daemon=True)
    writing.start()
    try:
        assert migrate(conn, QUICK, files=[TABLE, Migration(2, "0002_b.sql", "ALTER TABLE t ADD COLUMN b int")]) == [
            "0002_b.sql"]
    finally:
        stop.set()
        writing.join(10)
        holder.join(10)
    assert len(waits) > 20 and max(waits) < 1.5, max(waits)


def test_tries_spent_fail_with_the_reason_and_keep_what_was_applied(conn: psycopg.Connection, servers: Any) -> None:
    migrate(conn, files=[TABLE])
    url = _with_search_path(servers.database_url, conn.execute("SELECT current_schema()").fetchone()[0])
    holder = _holding_share_lock(url, "t", 3.0)
    files = [TABLE, Migration(2, "0002_x.sql", "CREATE TABLE x (id int)"),
             Migration(3, "0003_b.sql", "ALTER TABLE t ADD COLUMN b int")]
    with pytest.raises(MigrationLockError, match=r"0003_b.sql waited for a lock longer than 0.3 s on each of 3 tries"):
        migrate(conn, LockWaits(timeout_seconds=0.3, retries=2, pause_seconds=0.1), files=files)
    holder.join(10)
    assert _applied(conn) == ["0001_table.sql", "0002_x.sql"]


def test_a_second_migrator_waits_for_the_first_and_nothing_is_applied_twice(conn: psycopg.Connection,
                                                                            servers: Any) -> None:
    url = _with_search_path(servers.database_url, conn.execute("SELECT current_schema()").fetchone()[0])
    slow = Migration(2, "0002_slow.sql", "SELECT pg_sleep(1); CREATE TABLE once (id int)")
    outcome: dict[str, list[str]] = {}

    def second() -> None:
        time.sleep(0.3)
        with psycopg.connect(url, autocommit=True) as other:
            outcome["second"] = migrate(other, LockWaits(timeout_seconds=3, retries=0), files=[TABLE, slow])

    thread = threading.Thread(target=second)
    thread.start()
    outcome["first"] = migrate(conn, files=[TABLE, slow])
    thread.join(10)
    assert outcome == {"first": ["0001_table.sql", "0002_slow.sql"], "second": []}


def test_a_file_of_an_unknown_kind_is_refused_before_anything_runs(conn: psycopg.Connection) -> None:
    with pytest.raises(ValueError, match="unknown migration kind '-- tickwork: someday'"):
        migrate(conn, files=[TABLE, Migration(2, "0002_x.sql", "-- tickwork: someday\nSELECT 1")])


# ---------------------------------------------------------------- outside a transaction

INDEX = Migration(2, "0002_index.sql", "-- tickwork: no-transaction\n"
                                       "CREATE INDEX CONCURRENTLY IF NOT EXISTS t_a ON t (a);\n"
                                       "CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS t_a_id ON t (a, id);\n")


def _index_states(conn: psycopg.Connection) -> dict[str, bool]:
    rows = conn.execute("SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
                        " WHERE i.indrelid = to_regclass('t') AND c.relname LIKE 't_a%'")
    return dict(rows.fetchall())


def test_a_concurrent_build_replaces_the_invalid_index_a_timeout_left(own_database: str) -> None:
    """Break: a build cut short (a statement timeout in the deploy) leaves an INVALID index of the name, which
    `IF NOT EXISTS` would take as built. Must hold: the next run drops it and builds it again, valid."""
    with psycopg.connect(own_database, autocommit=True) as conn:
        migrate(conn, files=[TABLE])
        # What a CREATE INDEX CONCURRENTLY cut short leaves behind: the index, marked invalid (here another
        # definition, to tell the two apart).
        conn.execute("CREATE INDEX t_a ON t (id)")
        conn.execute("UPDATE pg_index SET indisvalid = false WHERE indexrelid = to_regclass('t_a')")
        assert _index_states(conn) == {"t_a": False}

        assert migrate(conn, files=[TABLE, INDEX]) == ["0002_index.sql"]

        assert _index_states(conn) == {"t_a": True, "t_a_id": True}
        definition = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 't_a'").fetchone()[0]
        assert definition.endswith("(a)")  # the migration's index, not the one left behind


def test_a_step_outside_a_transaction_is_recorded_once_every_statement_ran(own_database: str) -> None:
    with psycopg.connect(own_database, autocommit=True) as conn:
        migrate(conn, files=[TABLE])
        conn.execute("UPDATE t SET a = 1")  # the unique index cannot be built on these
        with pytest.raises(psycopg.errors.UniqueViolation):
            migrate(conn, files=[TABLE, Migration(2, INDEX.name, INDEX.sql.replace("(a, id)", "(a)"))])
        assert _applied(conn) == ["0001_table.sql"]
        assert _index_states(conn) == {"t_a": True, "t_a_id": False}
        assert migrate(conn, files=[TABLE, INDEX]) == ["0002_index.sql"]  # the invalid one dropped and built
        assert _index_states(conn) == {"t_a": True, "t_a_id": True}


def test_on_a_new_database_the_step_runs_plainly_in_the_same_run(conn: psycopg.Connection) -> None:
    """No writer can be waiting on tables this run made: the indexes are built inside a transaction (here in
    a schema of the shared database, where a concurrent build would wait for other tests' transactions)."""
    assert migrate(conn, files=[TABLE, INDEX]) == ["0001_table.sql", "0002_index.sql"]
    assert _index_states(conn) == {"t_a": True, "t_a_id": True}


# ---------------------------------------------------------------- backfills

BACKFILL = Migration(2, "0002_backfill.sql", "-- tickwork: batches\n"
                                             "UPDATE t SET a = id * 10 FROM (SELECT pg_sleep(0.2)) AS pause"
                                             " WHERE id IN (SELECT id FROM t WHERE a IS NULL ORDER BY id LIMIT 3)")


def test_a_backfill_stopped_at_its_deadline_goes_on_from_there(conn: psycopg.Connection) -> None:
    migrate(conn, files=[TABLE])
    with pytest.raises(TimeoutError, match="stopped between two batches"):
        migrate(conn, files=[TABLE, BACKFILL], deadline=time.monotonic() + 0.1)  # past it once a batch ran
    assert conn.execute("SELECT count(*) FROM t WHERE a IS NOT NULL").fetchone()[0] == 3  # one batch, kept
    assert _applied(conn) == ["0001_table.sql"]

    assert migrate(conn, files=[TABLE, BACKFILL]) == ["0002_backfill.sql"]
    assert conn.execute("SELECT array_agg(a ORDER BY id) FROM t").fetchone()[0] == [n * 10 for n in range(1, 11)]
