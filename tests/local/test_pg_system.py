"""The embedded PostgreSQL built from the machine's binaries (what Python 3.13 uses, pgserver having no wheel)."""
from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from tickwork_local import pg_system


@pytest.fixture
def binaries() -> Path:
    try:
        return pg_system.find_binaries()
    except pg_system.PostgresNotFoundError:
        pytest.skip("no PostgreSQL binaries on this machine")


def test_a_kept_cluster_starts_again_with_its_data(binaries: Path, tmp_path: Path) -> None:
    data_dir = tmp_path / "postgres"
    url, stop = pg_system.start(data_dir, keep_data=True)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE kept (n int)")
            conn.execute("INSERT INTO kept VALUES (42)")
    finally:
        stop()
    url, stop = pg_system.start(data_dir, keep_data=False)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT n FROM kept").fetchall() == [(42,)]
    finally:
        stop()
    assert not data_dir.exists()


def test_a_cluster_listens_on_no_port(binaries: Path, tmp_path: Path) -> None:
    url, stop = pg_system.start(tmp_path / "postgres", keep_data=False)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SHOW listen_addresses").fetchone() == ("",)
    finally:
        stop()
