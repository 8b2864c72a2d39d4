"""Embedded PostgreSQL from the machine's own binaries (initdb, pg_ctl), for Pythons pgserver has no wheel for.

pgserver ships no wheel past Python 3.12, while the Lambda runtime is 3.13: there the local runtime and the
tests start a private cluster with the PostgreSQL installed on the machine (Debian's `postgresql` package),
on a Unix socket in the data directory, so it never competes for a port with a server already running.
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path
from typing import Callable
from urllib.parse import quote

# PostgreSQL refuses to run as root; as root the cluster is owned by and run as this account.
SERVER_ACCOUNT = "postgres"
START_TIMEOUT_SECONDS = 60


class PostgresNotFoundError(RuntimeError):
    """Neither pgserver nor a PostgreSQL installation is available."""


def find_binaries() -> Path:
    """The folder that holds initdb and pg_ctl: on PATH, or the newest of Debian's /usr/lib/postgresql/N/bin."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(os.path.realpath(found)).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if not candidates:
        raise PostgresNotFoundError(
            "no embedded PostgreSQL: pgserver is not installed (it has no wheel for this Python) and no initdb "
            "was found; install PostgreSQL (apt-get install postgresql) or set DATABASE_URL"
        )
    return Path(candidates[-1]).parent


def start(data_dir: Path, keep_data: bool = True) -> tuple[str, Callable[[], None]]:
    """Initialise (once) and start a cluster in `data_dir`; returns its URL and a function that stops it."""
    binaries = find_binaries()
    data_dir.mkdir(parents=True, exist_ok=True)
    as_account = _as_account(data_dir)
    if not (data_dir / "PG_VERSION").exists():
        _run(as_account + [str(binaries / "initdb"), "-D", str(data_dir), "-U", "postgres", "--auth=trust",
                           "--encoding=UTF8", "--no-sync"])
    options = f"-c listen_addresses='' -k {data_dir} -c fsync=off"
    _run(as_account + [str(binaries / "pg_ctl"), "start", "-D", str(data_dir), "-w",
                       "-t", str(START_TIMEOUT_SECONDS), "-l", str(data_dir / "server.log"), "-o", options])

    def stop() -> None:
        _run(as_account + [str(binaries / "pg_ctl"), "stop", "-D", str(data_dir), "-m", "fast", "-w"])
        if not keep_data:
            shutil.rmtree(data_dir, ignore_errors=True)

    return f"postgresql://postgres@/postgres?host={quote(str(data_dir), safe='')}", stop


def _as_account(data_dir: Path) -> list[str]:
    """As root, hand the data directory (and the way to it) to the server account and run the tools as it."""
    if os.geteuid() != 0:
        return []
    shutil.chown(data_dir, SERVER_ACCOUNT, SERVER_ACCOUNT)
    for parent in data_dir.parents:
        if parent == Path("/"):
            break
        os.chmod(parent, os.stat(parent).st_mode | 0o001)  # traversable, not listable, by the account
    return ["runuser", "-u", SERVER_ACCOUNT, "--"]


def _run(command: list[str]) -> None:
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode:
        tool = next(Path(part).name for part in command if part.startswith("/"))
        raise RuntimeError(f"{tool} failed (exit {done.returncode}): {done.stderr.strip()}")
