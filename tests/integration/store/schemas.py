"""A schema of its own migrated up to a given version: a migration met by a database that already holds rows."""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

import psycopg

from tests.conftest import fresh_schema
from tickwork.store import migrate as migrations


@contextlib.contextmanager
def migrated_before(servers: Any, version: int) -> Iterator[psycopg.Connection]:
    """An autocommit connection to a new schema holding every migration before `version`; dropped after."""
    with fresh_schema(servers.database_url) as url, psycopg.connect(url, autocommit=True) as conn:
        migrations.migrate(conn, files=[m for m in migrations.migration_files() if m.version < version])
        yield conn
