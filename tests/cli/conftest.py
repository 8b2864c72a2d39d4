"""The CLI against the real local runtime, run as `make dev` runs it (`python -m tickwork_local`: API,
poller and executors on real PostgreSQL and Redis), driven through Click's CliRunner; the API is checked
with plain HTTP calls the CLI has no part in. The runtime is a process of its own: in this one, its JSON
logs would land in the output CliRunner captures."""
from __future__ import annotations

import json
import signal
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest
from click.testing import CliRunner, Result

from tests.integration.helpers import free_port, start_process, stop_process
from tickwork.settings import Settings
from tickwork_cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "jobs.yaml"
EXAMPLE_SECRETS = ("REPORT_TOKEN", "CLEANUP_KEY")


@dataclass(frozen=True)
class Runtime:
    api_url: str
    api_key: str


@dataclass
class Tickwork:
    """The `tickwork` command and, beside it, the API it talks to."""

    runtime: Runtime
    env: dict[str, str | None]

    def __call__(self, *args: str, input: str | None = None) -> Result:
        return CliRunner().invoke(cli, list(args), env=self.env, input=input, prog_name="tickwork")

    def json(self, *args: str) -> Any:
        """The command's JSON output, the command having succeeded."""
        result = self(*args, "--json")
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    def api(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        request = urllib.request.Request(
            self.runtime.api_url + path, method=method, data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.runtime.api_key}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def jobs(self, **query: str) -> dict[str, dict[str, Any]]:
        """The tenant's jobs by key (or by id when unkeyed), read from the API."""
        status, page = self.api("GET", "/jobs?" + urllib.parse.urlencode({"limit": 200, **query}))
        assert status == 200, page
        return {job.get("key") or job["id"]: job for job in page["items"]}


@pytest.fixture
def runtime(settings: Settings, tmp_path: Path) -> Iterator[Runtime]:
    process, url, key = start_process(settings, tmp_path / "runtime", free_port())
    yield Runtime(url, key)
    assert stop_process(process, signal.SIGTERM) == 0


@pytest.fixture
def tickwork(runtime: Runtime, tmp_path: Path) -> Tickwork:
    env: dict[str, str | None] = {"TICKWORK_API_URL": runtime.api_url, "TICKWORK_API_KEY": runtime.api_key,
                                  "XDG_CONFIG_HOME": str(tmp_path / "config")}
    tw = Tickwork(runtime, env)
    for name in EXAMPLE_SECRETS:  # the example's headers reference these
        status, answer = tw.api("PUT", f"/secrets/{name}", {"value": f"value-of-{name}"})
        assert status == 201, answer
    return tw
