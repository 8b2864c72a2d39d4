"""The local runtime's only environment read: everything else receives a LocalConfig or a Settings."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from tickwork.errors import ConfigurationError
from tickwork.settings import Settings
from tickwork_local.chaos import Chaos

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DATA_DIR = REPO_ROOT / ".tickwork"
# Loopback only: the dev API key is printed on the console, and targets may be private.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 3000


@dataclass(frozen=True)
class LocalConfig:
    data_dir: Path
    port: int
    dev_api_key: str | None
    env: Mapping[str, str]  # the snapshot the settings and the server resolution are built from
    host: str = DEFAULT_HOST
    chaos: Chaos | None = None  # TICKWORK_LOCAL_CHAOS: executor invocations as Lambda's at their worst

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> LocalConfig:
        if env is None:
            # CloudWatch metrics are EMF lines on stdout: in AWS the log service reads them, here they
            # would drown the console. POWERTOOLS_METRICS_DISABLED=false brings them back.
            os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
        env = dict(os.environ if env is None else env)
        return cls(
            data_dir=Path(env.get("TICKWORK_DATA_DIR") or DEFAULT_DATA_DIR),
            port=_port(env.get("TICKWORK_PORT")),
            dev_api_key=env.get("TICKWORK_DEV_API_KEY") or None,
            env=env,
            chaos=Chaos.parse(env["TICKWORK_LOCAL_CHAOS"]) if env.get("TICKWORK_LOCAL_CHAOS") else None,
        )

    def settings(self, database_url: str, redis_url: str) -> Settings:
        """The deployed settings, read the same way, except for the servers and the private-target guard."""
        return Settings.from_env({
            **self.env,
            "DATABASE_URL": database_url,
            "REDIS_URL": redis_url,
            # Local targets such as 127.0.0.1:9000 are the point of running locally.
            "TICKWORK_ALLOW_PRIVATE_TARGETS": "true",
            # The master key that wraps the data keys of secrets, created 0600 on first use.
            "TICKWORK_KEY_FILE": self.env.get("TICKWORK_KEY_FILE") or str(self.data_dir / "keys" / "master.key"),
        })


def _port(raw: str | None) -> int:
    if not raw:
        return DEFAULT_PORT
    try:
        port = int(raw)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise ConfigurationError(f"TICKWORK_PORT must be a port number, got {raw!r}")
    return port
