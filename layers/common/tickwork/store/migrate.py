"""Postgres plumbing: versioned migrations applied by one idempotent function."""
from __future__ import annotations

from importlib import resources
from typing import Any

# Any fixed 64-bit number: serializes concurrent migrators (two cold starts, a deploy and `make dev`).
_MIGRATION_LOCK = 0x7469636B776F726B


def _migration_files() -> list[tuple[int, str, str]]:
    folder = resources.files("tickwork") / "migrations"
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            found.append((int(entry.name.split("_", 1)[0]), entry.name, entry.read_text()))
    return sorted(found)


def migrate(conn: Any) -> list[str]:
    """Apply every migration not applied yet, each in its own transaction. Returns the names applied."""
    applied: list[str] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
        for version, name, sql in _migration_files():
            if version in done:
                continue
            conn.execute(sql)
            conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (version, name))
            applied.append(name)
    return applied
