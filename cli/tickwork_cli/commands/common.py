"""Options and lookups the commands share."""
from __future__ import annotations

import re
from typing import Any, Callable, TypeVar

import click

from tickwork_cli.client import Client, segment
from tickwork_cli.errors import ApiError

F = TypeVar("F", bound=Callable[..., Any])
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def json_option(command: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON (for scripts) instead of a table.")(command)


def utc_option(command: F) -> F:
    return click.option("--utc", is_flag=True, help="Show times in UTC instead of your local zone.")(command)


def find_job(api: Client, ref: str) -> dict[str, Any]:
    """A job by id or by key: an id-shaped reference is tried as an id first, then as a key."""
    if _UUID.match(ref):
        try:
            return api.get(f"/jobs/{segment(ref)}")
        except ApiError as error:
            if error.status != 404:
                raise
    return api.get(f"/jobs/by-key/{segment(ref)}")
