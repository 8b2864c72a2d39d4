"""The words tickwork.vocab defines are the words the schema's CHECK constraints accept, no more and no fewer: a
status added on one side only is a run the database refuses, or one the API can neither show nor filter."""
from __future__ import annotations

import re
from enum import StrEnum
from typing import Any

import pytest

from tickwork.vocab import Catchup, JobStatus, Overlap, RunStatus, Trigger

# (table, column, the words its CHECK constraint allows)
CHECKED = [
    ("executions", "status", set(RunStatus)),
    ("executions", "trigger", set(Trigger)),
    ("jobs", "status", set(JobStatus) - {JobStatus.ERRORED}),  # errored is shown, never stored
    ("jobs", "overlap", set(Overlap)),
    ("jobs", "catchup", set(Catchup)),
]


def allowed(db: Any, table: str, column: str) -> set[str]:
    """The quoted words of the CHECK constraint on `column` of `table` in the current schema."""
    rows = db.execute(
        "SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid"
        " WHERE c.contype = 'c' AND t.relname = %s AND t.relnamespace = to_regnamespace(current_schema())"
        " AND pg_get_constraintdef(c.oid) LIKE %s", (table, f"%({column} = %"),
    ).fetchall()
    assert len(rows) == 1, rows
    return set(re.findall(r"'([^']*)'::text", rows[0][0]))


@pytest.mark.parametrize(("table", "column", "words"), CHECKED, ids=[f"{t}.{c}" for t, c, _ in CHECKED])
def test_the_schema_accepts_exactly_the_vocabulary(db: Any, table: str, column: str, words: set[StrEnum]) -> None:
    assert allowed(db, table, column) == {word.value for word in words}
