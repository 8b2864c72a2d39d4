"""Chromium for the console's tests and screenshots: Debian's browser driven by Playwright, never a downloaded one.

The browser is the machine's `chromium` package (`TICKWORK_CHROMIUM` names another binary). When it is
missing the tests fail, as they must in CI (`.ci/run` installs it); set `TICKWORK_SKIP_BROWSER_TESTS=1`
to skip them instead on a machine that cannot have it.
"""
from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

DEFAULT_CHROMIUM = "/usr/bin/chromium"
SKIP_VARIABLE = "TICKWORK_SKIP_BROWSER_TESTS"


def chromium_path() -> str:
    """The browser binary, or a failure (a skip when SKIP_VARIABLE says so) naming what is missing."""
    path = os.environ.get("TICKWORK_CHROMIUM", DEFAULT_CHROMIUM)
    problem = None
    if not Path(path).is_file():
        problem = f"Chromium not found at {path}: apt-get install -y chromium (or set TICKWORK_CHROMIUM)"
    else:
        try:
            import playwright  # noqa: F401
        except ImportError:
            problem = "Playwright for Python is not installed: pip install -e '.[dev]'"
    if problem is None:
        return path
    if os.environ.get(SKIP_VARIABLE) == "1":
        pytest.skip(f"{problem}; skipped because {SKIP_VARIABLE}=1")
    pytest.fail(f"{problem}. Set {SKIP_VARIABLE}=1 to skip the browser tests on this machine.")


def call(api_url: str, key: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """The public API, as a client other than the console would call it."""
    request = urllib.request.Request(
        api_url + path, method=method, data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def create_job(api_url: str, key: str, **fields: Any) -> dict[str, Any]:
    status, job = call(api_url, key, "POST", "/jobs", fields)
    assert status == 201, job
    return job
