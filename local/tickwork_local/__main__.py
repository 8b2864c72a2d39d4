"""`make dev`: run Tickwork locally until Ctrl-C (SIGINT) or SIGTERM."""
from __future__ import annotations

import errno
import logging
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from tickwork import __version__
from tickwork_local import devkey
from tickwork_local.config import LocalConfig
from tickwork_local.logs import configure_console
from tickwork_local.runtime import LocalRuntime
from tickwork_local.services import resolve

logger = logging.getLogger("tickwork_local")


def banner(api_url: str, api_key: str, key_source: str, data_dir: Path) -> str:
    example = (
        f"curl -s -X POST {api_url}/jobs \\\n"
        f"    -H 'Authorization: Bearer {api_key}' -H 'Content-Type: application/json' \\\n"
        "    -d '{\"name\": \"hello\", \"schedule\": \"*/5 * * * * *\","
        " \"request\": {\"method\": \"POST\", \"url\": \"http://127.0.0.1:9000/\"}}'"
    )
    return "\n".join([
        "",
        f"Tickwork {__version__} is running locally.",
        f"  API      {api_url}",
        f"  Docs     {api_url}/docs  (try calls with the key below)",
        f"  API key  {api_key}  ({key_source})",
        f"  Data     {data_dir}  (delete it to start from scratch)",
        "",
        "Create a job that calls http://127.0.0.1:9000/ every 5 seconds:",
        f"  {example}",
        f"  curl -s {api_url}/jobs -H 'Authorization: Bearer {api_key}'",
        "",
        "Ctrl-C to stop.",
        "",
    ])


def _stop_on_signals(stop: threading.Event) -> None:
    def handle(signum: int, _frame: FrameType | None) -> None:
        logger.info("%s received, shutting down (Ctrl-C again to force)", signal.Signals(signum).name)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        stop.set()

    signal.signal(signal.SIGINT, handle)
    signal.signal(signal.SIGTERM, handle)


def _key_source(config: LocalConfig) -> str:
    if config.dev_api_key:
        return "from TICKWORK_DEV_API_KEY"
    return f"saved in {config.data_dir / devkey.KEY_FILE}"


def run(config: LocalConfig) -> int:
    stop = threading.Event()
    _stop_on_signals(stop)
    servers = resolve(config.data_dir, keep_data=True, env=dict(config.env))
    try:
        runtime = LocalRuntime(config.settings(servers.database_url, servers.redis_url), config.port, config.host,
                               config.dev_api_key or devkey.read_key(config.data_dir), chaos=config.chaos)
        return _serve(runtime, config, stop)
    finally:
        servers.close()


def _serve(runtime: LocalRuntime, config: LocalConfig, stop: threading.Event) -> int:
    try:
        runtime.start()
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        logger.error("port %d is in use: stop what holds it or set TICKWORK_PORT", config.port)
        return 1
    try:
        if not config.dev_api_key:
            devkey.save_key(config.data_dir, runtime.api_key)
        print(banner(runtime.api_url, runtime.api_key, _key_source(config), config.data_dir), flush=True)
        stop.wait()
    finally:
        runtime.stop()
    logger.info("stopped")
    return 0


def main() -> int:
    configure_console()
    return run(LocalConfig.from_env())


if __name__ == "__main__":
    sys.exit(main())
