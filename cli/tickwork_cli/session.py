"""What every command may need, built on first use: `completion` and `--help` need no API key."""
from __future__ import annotations

import os

import click

from tickwork_cli import config
from tickwork_cli.client import Client


class Session:
    def __init__(self) -> None:
        self._client: Client | None = None

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = Client(*config.resolve(os.environ, config.config_path()).require())
        return self._client


def client() -> Client:
    """The current command's API client."""
    return click.get_current_context().ensure_object(Session).client
