"""Migration 0012 (a manual run is not a slot) on a database that already holds runs, as a deploy meets it."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Iterator

import psycopg
import pytest

from tests.integration.store.schemas import migrated_before
from tickwork.store import migrate as migrations

SLOT = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)
MANUAL_RUNS = "0012_manual_runs.sql"
# The index an operator builds beforehand (the migration's comment: CREATE UNIQUE INDEX CONCURRENTLY,
# which here would wait for every transaction on the shared test server; the index it makes is the same).
PREBUILT = ("CREATE UNIQUE INDEX executions_one_per_slot_scheduled"
            " ON executions (job_id, scheduled_for) WHERE trigger = 'schedule'")


@pytest.fixture
def before_0012(servers: Any) -> Iterator[psycopg.Connection]:
    """A schema migrated up to the version before 0012, holding a job with scheduled and manual runs."""
    with migrated_before(servers, 12) as conn:
        _populate(conn)
        yield conn


def _populate(conn: psycopg.Connection) -> None:
    conn.execute("INSERT INTO tenants (id, name) VALUES (gen_random_uuid(), 't')")
    conn.execute("INSERT INTO jobs (id, tenant_id, name, schedule, request, retry, status)"
                 " SELECT gen_random_uuid(), id, 'j', '* * * * * *', '{}', '{}', 'active' FROM tenants")
    for n in range(3):
        _insert(conn, SLOT - timedelta(seconds=n), "schedule")
    _insert(conn, SLOT - timedelta(milliseconds=1500), "manual")


def _insert(conn: psycopg.Connection, at: datetime, trigger: str) -> None:
    conn.execute("INSERT INTO executions (id, tenant_id, job_id, scheduled_for, trigger, status)"
                 " SELECT gen_random_uuid(), tenant_id, id, %s, %s, 'succeeded' FROM jobs", (at, trigger))


def _runs(conn: psycopg.Connection) -> list[tuple[datetime, str]]:
    return conn.execute("SELECT scheduled_for, trigger FROM executions ORDER BY scheduled_for, trigger").fetchall()


def _keeps_runs_and_keys_only_slots(conn: psycopg.Connection) -> None:
    """Every run kept; a manual run at a slot's instant is a row of its own; a slot is still one row."""
    runs = _runs(conn)
    assert MANUAL_RUNS not in migrations.migrate(conn)  # applied once
    _insert(conn, SLOT, "manual")
    assert _runs(conn) == sorted([*runs, (SLOT, "manual")])
    with pytest.raises(psycopg.errors.UniqueViolation):
        _insert(conn, SLOT, "schedule")


def test_0012_on_a_populated_table_keeps_every_run_and_keys_only_slots(before_0012: psycopg.Connection) -> None:
    runs = _runs(before_0012)
    with pytest.raises(psycopg.errors.UniqueViolation):  # what a manual run at a slot's instant met
        _insert(before_0012, SLOT, "manual")

    assert MANUAL_RUNS in migrations.migrate(before_0012)

    assert _runs(before_0012) == runs
    _keeps_runs_and_keys_only_slots(before_0012)


def test_0012_takes_the_index_an_operator_built_beforehand(before_0012: psycopg.Connection) -> None:
    before_0012.execute(PREBUILT)
    assert MANUAL_RUNS in migrations.migrate(before_0012)
    assert before_0012.execute("SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()"
                               " AND indexname LIKE 'executions_one_per_slot%'").fetchall() == [
        ("executions_one_per_slot_scheduled",)]
    _keeps_runs_and_keys_only_slots(before_0012)


def test_0012_refuses_an_index_a_failed_concurrent_build_left_invalid(before_0012: psycopg.Connection) -> None:
    before_0012.execute(PREBUILT)
    # What a CREATE INDEX CONCURRENTLY that failed half-way leaves behind: the index, marked invalid.
    before_0012.execute("UPDATE pg_index SET indisvalid = false"
                        " WHERE indexrelid = to_regclass('executions_one_per_slot_scheduled')")
    with pytest.raises(psycopg.errors.RaiseException, match="is invalid"):
        migrations.migrate(before_0012)
    assert before_0012.execute("SELECT count(*) FROM schema_migrations WHERE version = 12").fetchone()[0] == 0
