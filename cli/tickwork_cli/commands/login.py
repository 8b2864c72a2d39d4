"""`tickwork login`: the API's URL and a key, checked against the API, kept in the user's config file."""
from __future__ import annotations

import os
import sys

import click

from tickwork_cli import config
from tickwork_cli.client import Client
from tickwork_cli.errors import ApiError, CliError


@click.command()
@click.option("--api-url", help="The API's base URL, e.g. https://<api-id>.execute-api.<region>.amazonaws.com "
              "or http://127.0.0.1:3000 for `make dev`. Default: the one already configured.")
@click.option("--stdin", "from_stdin", is_flag=True, help="Read the API key from standard input instead of asking.")
@click.option("--no-check", is_flag=True, help="Save without checking the key against the API.")
def login(api_url: str | None, from_stdin: bool, no_check: bool) -> None:
    """Save the API URL and an API key (asked for without echo) for later commands.

    They go to config.json in your config directory (readable by you only). TICKWORK_API_URL and
    TICKWORK_API_KEY, when set, still win over it.
    """
    path = config.config_path()
    current = config.resolve(os.environ, path)
    url = (api_url or current.api_url or click.prompt("API URL")).rstrip("/")
    key = _read_key(from_stdin)
    if not no_check:
        _check(url, key)
    config.save(path, config.Config(url, key))
    click.echo(f"Saved the API URL and key to {path}", err=True)


def _read_key(from_stdin: bool) -> str:
    key = sys.stdin.readline().strip() if from_stdin else click.prompt("API key", hide_input=True).strip()
    if not key:
        raise CliError("no API key given")
    return key


def _check(url: str, key: str) -> None:
    try:
        Client(url, key).get("/jobs", {"limit": 1})
    except ApiError as error:
        if error.status in (401, 403):
            raise CliError(f"the API at {url} refused this key ({error.status}); nothing saved") from None
        raise
