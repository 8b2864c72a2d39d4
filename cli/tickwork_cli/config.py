"""Where the API is and the key to call it with: environment variables first, then `tickwork login`'s file.

The file is JSON in the user's config directory (`click.get_app_dir("tickwork")`, e.g.
~/.config/tickwork/config.json), readable by its owner only: it holds an API key.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import click

from tickwork_cli.errors import CliError

URL_VARIABLE = "TICKWORK_API_URL"
KEY_VARIABLE = "TICKWORK_API_KEY"
CONFIG_FILE = "config.json"


@dataclass(frozen=True)
class Config:
    api_url: str | None
    api_key: str | None

    def require(self) -> tuple[str, str]:
        if not self.api_url:
            raise CliError(f"no API URL: set {URL_VARIABLE} or run `tickwork login --api-url URL`")
        if not self.api_key:
            raise CliError(f"no API key: set {KEY_VARIABLE} or run `tickwork login`")
        return self.api_url.rstrip("/"), self.api_key


def config_path() -> Path:
    return Path(click.get_app_dir("tickwork")) / CONFIG_FILE


def read_file(path: Path) -> Config:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return Config(None, None)
    except (OSError, ValueError) as error:
        raise CliError(f"cannot read {path}: {error}") from None
    if not isinstance(data, dict):
        raise CliError(f"cannot read {path}: not a JSON object")
    return Config(_text(data.get("api_url")), _text(data.get("api_key")))


def resolve(environ: Mapping[str, str], path: Path) -> Config:
    """Each setting from its environment variable when set (and not empty), else from the file."""
    saved = read_file(path)
    return Config(environ.get(URL_VARIABLE) or saved.api_url, environ.get(KEY_VARIABLE) or saved.api_key)


def save(path: Path, config: Config) -> None:
    """Write the file mode 0600 (created so, never widened first), replacing any previous one atomically."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.tmp")
    staging.unlink(missing_ok=True)  # O_CREAT keeps an existing file's mode, which may be wider
    fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump({"api_url": config.api_url, "api_key": config.api_key}, out)
        out.write("\n")
    os.replace(staging, path)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
