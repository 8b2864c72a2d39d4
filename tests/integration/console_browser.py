"""Chromium for the console's tests and screenshots: Debian's browser driven by Playwright, never a downloaded one.

The browser is the machine's `chromium` package (`TICKWORK_CHROMIUM` names another binary). When it is
missing the tests fail, as they must in CI (`.ci/run` installs it); set `TICKWORK_SKIP_BROWSER_TESTS=1`
to skip them instead on a machine that cannot have it.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.local.test_local_runtime import call
from tickwork_local.runtime import LocalRuntime

__all__ = ["call", "chromium_path", "create_job", "job_runs"]

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


def create_job(runtime: LocalRuntime, **fields: Any) -> dict[str, Any]:
    status, job = call(runtime, "POST", "/jobs", fields)
    assert status == 201, job
    return job


def job_runs(runtime: LocalRuntime, job_id: str) -> list[dict[str, Any]]:
    """The job's runs, newest first, from the API. A caller polling this passes
    `interval=API_POLL_INTERVAL` to wait_for: the key's rate limit is shared with the browser."""
    status, page = call(runtime, "GET", f"/jobs/{job_id}/executions")
    assert status == 200, page
    return page["items"]
