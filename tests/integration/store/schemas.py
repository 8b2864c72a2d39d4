"""A schema of its own migrated up to a given version: a migration met by a database that already holds rows."""
from __future__ import annotations

import contextlib
import uuid
from typing import Any, Iterator

import psycopg
import pytest

from tests.conftest import _with_search_path
from tickwork.store import migrate as migrations


@contextlib.contextmanager
def migrated_before(servers: Any, monkeypatch: pytest.MonkeyPatch, version: int) -> Iterator[psycopg.Connection]:
    """An autocommit connection to a new schema holding every migration before `version`; dropped after."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(servers.database_url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    try:
        with psycopg.connect(_with_search_path(servers.database_url, schema), autocommit=True) as conn:
            every = migrations._migration_files()
            with monkeypatch.context() as patch:
                patch.setattr(migrations, "_migration_files", lambda: [f for f in every if f[0] < version])
                migrations.migrate(conn)
            yield conn
    finally:
        with psycopg.connect(servers.database_url, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
