"""The only module that reads the environment. Built once per execution environment."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

from tickwork.errors import ConfigurationError

DEFAULT_NAMESPACE = "tickwork"
# Claim jobs due within the next tick so executors can fire at the exact instant instead of up to 1 s late.
DEFAULT_LOOKAHEAD_MS = 1000
# A batch large enough to make a 10,000-job burst a handful of round trips, small enough for one Lua call.
DEFAULT_BATCH_SIZE = 500
# The tick lock only has to outlive one tick; a poller frozen longer must not block the next second.
DEFAULT_TICK_LOCK_MS = 900
# Below one second the poller cannot honour the schedule.
DEFAULT_MIN_INTERVAL_SECONDS = 1
# Keep the executor well inside its own Lambda timeout.
DEFAULT_MAX_REQUEST_TIMEOUT_SECONDS = 120


def _bool(value: str | None, default: bool) -> bool:
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ConfigurationError(f"{name} must be an integer, got {raw!r}") from exc


@dataclass(frozen=True)
class Settings:
    database_url: str
    redis_url: str
    namespace: str = DEFAULT_NAMESPACE
    executor_function_name: str = ""
    allow_private_targets: bool = False
    lookahead_ms: int = DEFAULT_LOOKAHEAD_MS
    batch_size: int = DEFAULT_BATCH_SIZE
    tick_lock_ms: int = DEFAULT_TICK_LOCK_MS
    min_interval_seconds: int = DEFAULT_MIN_INTERVAL_SECONDS
    max_request_timeout_seconds: int = DEFAULT_MAX_REQUEST_TIMEOUT_SECONDS

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        missing = [name for name in ("DATABASE_URL", "REDIS_URL") if not env.get(name)]
        if missing:
            raise ConfigurationError(f"missing environment variable(s): {', '.join(missing)}")
        return cls(
            database_url=env["DATABASE_URL"],
            redis_url=env["REDIS_URL"],
            namespace=env.get("TICKWORK_NAMESPACE") or DEFAULT_NAMESPACE,
            executor_function_name=env.get("EXECUTOR_FUNCTION_NAME", ""),
            allow_private_targets=_bool(env.get("TICKWORK_ALLOW_PRIVATE_TARGETS"), False),
            lookahead_ms=_int(env, "TICKWORK_LOOKAHEAD_MS", DEFAULT_LOOKAHEAD_MS),
            batch_size=_int(env, "TICKWORK_BATCH_SIZE", DEFAULT_BATCH_SIZE),
            tick_lock_ms=_int(env, "TICKWORK_TICK_LOCK_MS", DEFAULT_TICK_LOCK_MS),
            min_interval_seconds=_int(env, "TICKWORK_MIN_INTERVAL_SECONDS", DEFAULT_MIN_INTERVAL_SECONDS),
            max_request_timeout_seconds=_int(
                env, "TICKWORK_MAX_REQUEST_TIMEOUT_SECONDS", DEFAULT_MAX_REQUEST_TIMEOUT_SECONDS
            ),
        )
