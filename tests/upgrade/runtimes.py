"""A release's local runtime (`python -m tickwork_local`, docs/local.md) as a process of its own, on a shared
PostgreSQL database and Redis namespace: started, waited for, stopped with SIGTERM as an operator (or
Lambda's shutdown) stops it, and its poller's working ticks read back from its console log."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Mapping

START_TIMEOUT_SECONDS = 90
# SHUTDOWN_GRACE_SECONDS of tickwork_local.runtime (5 s for executors) and the rest of its stop.
STOP_TIMEOUT_SECONDS = 30
# The poller's line for a tick that held the tick lock and dispatched runs (tickwork.dispatch.poller).
_TICK = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\+0000 INFO\s+poller: tick dispatched runs")


@dataclass(frozen=True)
class Release:
    label: str  # e.g. "0.29.0 (26fd9f7)"
    python: Path  # an interpreter with the release installed
    cwd: Path


@dataclass
class Runtime:
    release: Release
    port: int
    env: Mapping[str, str]
    logs: Path
    starts: int = 0
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.starts += 1
        self.logs.mkdir(parents=True, exist_ok=True)
        with open(self._log("out"), "ab") as out, open(self._log("err"), "ab") as err:
            self.process = subprocess.Popen([str(self.release.python), "-m", "tickwork_local"], cwd=self.release.cwd,
                                            env=dict(self.env), stdout=out, stderr=err)
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not self._answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.release.label} did not start: {self.tail()}")
            time.sleep(0.2)

    def stop(self) -> int:
        """SIGTERM, and its exit status once it has shut down gracefully."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(STOP_TIMEOUT_SECONDS)
        finally:
            if self.process.poll() is None:  # a runtime that hangs on SIGTERM fails the test, and is ended
                self.process.kill()
                self.process.wait()

    def working_ticks(self) -> list[float]:
        """When its poller ticked with the tick lock held (and dispatched), every start together."""
        found = []
        for line in self._log("err").read_text(errors="replace").splitlines():
            if match := _TICK.match(line):
                found.append(datetime.strptime(match.group(1) + "+0000", "%Y-%m-%d %H:%M:%S,%f%z").timestamp())
        return found

    def errors(self) -> list[str]:
        """Its ERROR lines and tracebacks, each traceback whole (up to the exception's own line)."""
        found: list[str] = []
        lines = self._log("err").read_text(errors="replace").splitlines()
        for number, line in enumerate(lines):
            if " ERROR " in line:
                found.append(line)
            elif line.startswith("Traceback"):
                end = next((i for i in range(number + 1, len(lines)) if not lines[i].startswith(" ")), len(lines) - 1)
                found.append("\n".join(lines[number:end + 1]))
        return found

    def tail(self, lines: int = 40) -> str:
        text = self._log("err").read_text(errors="replace") if self._log("err").exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def _log(self, stream: str) -> Path:
        return self.logs / f"{self.release.label.split()[0]}-{self.port}.{stream}.log"

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=2):
                return True
        except urllib.error.HTTPError:
            return True  # 503 before its first tick: up all the same
        except OSError:
            return False


def runtime_env(database_url: str, redis_url: str, namespace: str, token: str, key_file: Path, data_dir: Path,
                port: int) -> dict[str, str]:
    """What both releases run with: the same database, Redis namespace, API key and master key; a data dir
    and a port each. Nothing else of this process's environment but what a process needs."""
    keep = {name: os.environ[name] for name in ("PATH", "HOME", "LANG", "TMPDIR") if name in os.environ}
    return {**keep, "DATABASE_URL": database_url, "REDIS_URL": redis_url, "TICKWORK_NAMESPACE": namespace,
            "TICKWORK_DEV_API_KEY": token, "TICKWORK_KEY_FILE": str(key_file), "TICKWORK_DATA_DIR": str(data_dir),
            "TICKWORK_PORT": str(port), "POWERTOOLS_METRICS_DISABLED": "true",
            # The driver and the load's setup come from one key: no rate limit in the way.
            "TICKWORK_RATE_LIMIT_PER_SECOND": "0", "TICKWORK_TENANT_RATE_LIMIT_PER_SECOND": "0"}
