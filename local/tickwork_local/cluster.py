"""A throwaway Redis Cluster on this machine: N primaries of the system's redis-server in cluster mode.

For the sharded-index tests and benchmark only: temporary directories, free ports, no persistence, torn
down by `close()`. Needs Debian's redis-server and redis-cli (`apt-get install redis-server`).
"""
from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable

START_TIMEOUT_SECONDS = 20
STOP_TIMEOUT_SECONDS = 5
BUS_PORT_OFFSET = 10000  # Redis Cluster's node-to-node bus listens on port + 10000
PORTS = range(20000, 45000)


def available() -> bool:
    return bool(shutil.which("redis-server") and shutil.which("redis-cli"))


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_ports(count: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < count:
        port = random.choice(PORTS)
        if port not in ports and _free(port) and _free(port + BUS_PORT_OFFSET):
            ports.append(port)
    return ports


def without_faketime() -> dict[str, str]:
    """This process's environment without LD_PRELOAD. make test-shifted preloads libfaketime into every
    child, and some hang or crawl under it: redis-server in cluster mode and redis-cli ("Unexpected
    recursive calls to clock_gettime()"), Chromium (no page loaded within 30 s). Those keep the real clock;
    the cluster's claims are scored by the caller's clock."""
    return {name: value for name, value in os.environ.items() if name != "LD_PRELOAD"}


class LocalCluster:
    """Started on construction; `url` is what Settings.redis_url takes for a cluster-mode cache."""

    def __init__(self, primaries: int = 3) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="tickwork-cluster-"))
        self.ports = _free_ports(primaries)
        self._servers: list[subprocess.Popen[bytes]] = []
        try:
            for port in self.ports:
                self._servers.append(self._start(port))
            self._wait(lambda port: self._cli(port, "ping") == "PONG")
            nodes = [f"127.0.0.1:{port}" for port in self.ports]
            subprocess.run(["redis-cli", "--cluster", "create", *nodes, "--cluster-replicas", "0", "--cluster-yes"],
                           check=True, capture_output=True, timeout=START_TIMEOUT_SECONDS, env=without_faketime())
            self._wait(lambda port: "cluster_state:ok" in self._cli(port, "cluster", "info"))
        except BaseException:
            self.close()
            raise
        self.url = f"redis+cluster://127.0.0.1:{self.ports[0]}/0"

    def _start(self, port: int) -> subprocess.Popen[bytes]:
        node_dir = self.dir / str(port)
        node_dir.mkdir()
        return subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
             "--cluster-config-file", str(node_dir / "nodes.conf"), "--dir", str(node_dir), "--save", "",
             "--appendonly", "no", "--protected-mode", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=without_faketime(),
        )

    @staticmethod
    def _cli(port: int, *args: str) -> str:
        done = subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, text=True, timeout=5,
                              env=without_faketime())
        return done.stdout.strip()

    def _wait(self, ready: Callable[[int], bool]) -> None:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        pending = list(self.ports)
        while pending:
            pending = [port for port in pending if not ready(port)]
            if pending and time.monotonic() > deadline:
                raise RuntimeError(f"redis cluster nodes not ready: {pending}")
            if pending:
                time.sleep(0.05)  # polling a child process's readiness; not a correctness wait

    def close(self) -> None:
        for server in self._servers:
            server.terminate()
        for server in self._servers:
            try:
                server.wait(STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                server.kill()
        self._servers.clear()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

