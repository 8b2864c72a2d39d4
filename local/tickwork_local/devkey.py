"""The dev API key, kept in the data dir: only its hash is in Postgres, so a restart could not print it again."""
from __future__ import annotations

import os
from pathlib import Path

KEY_FILE = "dev-api-key"


def read_key(data_dir: Path) -> str | None:
    try:
        return (data_dir / KEY_FILE).read_text().strip() or None
    except FileNotFoundError:
        return None


def save_key(data_dir: Path, token: str) -> None:
    """Write the key readable by its owner only, replacing any previous one atomically."""
    data_dir.mkdir(parents=True, exist_ok=True)
    staging = data_dir / f".{KEY_FILE}.tmp"
    staging.unlink(missing_ok=True)  # O_CREAT keeps an existing file's mode, which may be wider
    fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(token + "\n")
    os.replace(staging, data_dir / KEY_FILE)
