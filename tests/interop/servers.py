"""The stock servers of the interop suite that run as processes: uvicorn, gunicorn (sync worker), aiohttp,
Node's `http` module and Debian's nginx, each on a free port of 127.0.0.1 with its files in a temporary
directory, recording every request it reads (tests.interop.shapes).

nginx and Node are the machine's (`make test` installs them from Debian's packages); uvicorn, gunicorn
and aiohttp are dev dependencies. When one is missing the tests fail, naming it; set
`TICKWORK_SKIP_INTEROP_TESTS=1` to skip them instead on a machine that cannot have them.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.helpers import free_port
from tests.interop.shapes import BIG_BODY, LOG_VARIABLE, Arrival, read_arrivals
from tests.interop.tls import ServerCertificate
from tickwork_local.cluster import without_faketime

ROOT = Path(__file__).resolve().parents[2]
APPS = Path(__file__).resolve().parent / "apps"
SKIP_VARIABLE = "TICKWORK_SKIP_INTEROP_TESTS"
# Five interpreters and nginx start at once on two cores: seconds each on a loaded machine.
START_TIMEOUT_SECONDS = 30.0
STOP_TIMEOUT_SECONDS = 5.0
# uvicorn's keep-alive, short as the reproduction had it: an idle connection is closed after 1 s.
UVICORN_KEEP_ALIVE_SECONDS = 1
# Node's keepAliveTimeout for the second Node target (its default is 5 s).
NODE_SHORT_KEEP_ALIVE_MS = 300
# nginx: idle keep-alive connections are closed after 2 s, and every connection after its third request.
NGINX_KEEPALIVE = "keepalive_timeout 2s;\n    keepalive_requests 3;"


def executable(name: str, variable: str, debian_path: str) -> str | None:
    """A server binary: $variable, else the PATH's, else where Debian's package puts it."""
    path = os.environ.get(variable) or shutil.which(name) or debian_path
    return path if Path(path).is_file() else None


def require_servers() -> tuple[str, str]:
    """nginx's and node's paths, or a failure (a skip when SKIP_VARIABLE says so) naming what is missing."""
    nginx = executable("nginx", "TICKWORK_NGINX", "/usr/sbin/nginx")
    node = executable("node", "TICKWORK_NODE", "/usr/bin/node")
    missing = [f"Debian's {package} (apt-get install -y {package})"
               for package, found in (("nginx", nginx), ("nodejs", node)) if found is None]
    missing += [f"the Python package {module} (pip install -e '.[dev]')"
                for module in ("uvicorn", "gunicorn", "aiohttp") if importlib.util.find_spec(module) is None]
    if nginx is not None and node is not None and not missing:
        return nginx, node
    problem = "the interop suite's servers are missing: " + "; ".join(missing)
    if os.environ.get(SKIP_VARIABLE) == "1":
        pytest.skip(f"{problem}; skipped because {SKIP_VARIABLE}=1")
    pytest.fail(f"{problem}. `make test` installs them; set {SKIP_VARIABLE}=1 to skip the interop tests on this machine.")


class ProcessTarget:
    """A server process started at construction; `ready()` waits until its ports accept connections."""

    def __init__(self, name: str, argv: list[str], directory: Path, ports: list[int],
                 env: dict[str, str] | None = None) -> None:
        self.name = name
        self.ports = ports
        self.url = f"http://127.0.0.1:{ports[0]}"
        self.log = directory / "arrivals.jsonl"  # nginx writes its access log here
        self._stderr = directory / "stderr.log"
        # The real clock (make test-shifted preloads libfaketime): a server's clock plays no part here.
        environment = without_faketime() | {LOG_VARIABLE: str(self.log)} | (env or {})
        with open(self._stderr, "wb") as stderr:
            self.process = subprocess.Popen(argv, cwd=ROOT, env=environment, stdin=subprocess.DEVNULL,
                                            stdout=stderr, stderr=subprocess.STDOUT, start_new_session=True)

    def ready(self, deadline: float) -> None:
        for port in self.ports:
            while not _accepts(port):
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.close()
                    raise RuntimeError(f"{self.name} did not start (exit {self.process.returncode}):\n{self.output()}")
                time.sleep(0.05)

    def arrivals(self) -> list[Arrival]:
        return read_arrivals(str(self.log))

    def output(self) -> str:
        return self._stderr.read_text(errors="replace")[-4000:]

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def uvicorn(directory: Path) -> ProcessTarget:
    port = free_port()
    return ProcessTarget("uvicorn", [
        sys.executable, "-m", "uvicorn", "--host", "127.0.0.1", "--port", str(port),
        "--timeout-keep-alive", str(UVICORN_KEEP_ALIVE_SECONDS), "--no-access-log", "--log-level", "warning",
        "--app-dir", str(ROOT), "tests.interop.apps.asgi_target:app",
    ], directory, [port])


def gunicorn(directory: Path) -> ProcessTarget:
    port = free_port()
    return ProcessTarget("gunicorn", [
        sys.executable, "-m", "gunicorn", "--worker-class", "sync", "--workers", "3", "--bind", f"127.0.0.1:{port}",
        "--chdir", str(ROOT), "--log-level", "warning", "tests.interop.apps.wsgi_target:app",
    ], directory, [port])


def aiohttp(directory: Path) -> ProcessTarget:
    port = free_port()
    return ProcessTarget("aiohttp", [sys.executable, "-m", "tests.interop.apps.aiohttp_target", str(port)],
                         directory, [port])


def node(binary: str, directory: Path, keep_alive_ms: int | None = None) -> ProcessTarget:
    port = free_port()
    env = {"PORT": str(port)} | ({"KEEP_ALIVE_MS": str(keep_alive_ms)} if keep_alive_ms is not None else {})
    name = "node" if keep_alive_ms is None else f"node (keepAliveTimeout {keep_alive_ms} ms)"
    return ProcessTarget(name, [binary, str(APPS / "node_target.js")], directory, [port], env=env)


@dataclass(frozen=True)
class NginxSites:
    """What nginx serves besides its plain-HTTP answers: `upstream` (a server nginx proxies to, answering
    by shape under /upstream/) and two HTTPS sites, by certificates of two CAs."""

    upstream: str
    trusted: ServerCertificate
    unknown: ServerCertificate


class Nginx(ProcessTarget):
    """nginx in the foreground (one process, no master), its prefix, logs and temp dirs in `directory`.
    `url` is plain HTTP; `trusted_url` and `unknown_url` are HTTPS by each CA's certificate."""

    def __init__(self, binary: str, directory: Path, sites: NginxSites) -> None:
        ports = [free_port(), free_port(), free_port()]
        (directory / "www").mkdir()
        (directory / "www" / "big").write_bytes(BIG_BODY)
        config = directory / "nginx.conf"
        config.write_text(_nginx_config(directory, ports, sites))
        super().__init__("nginx", [binary, "-p", str(directory), "-c", str(config), "-e", str(directory / "error.log")],
                         directory, ports)
        self.trusted_url = f"https://127.0.0.1:{ports[1]}"
        self.unknown_url = f"https://127.0.0.1:{ports[2]}"

    def output(self) -> str:
        errors = self.log.with_name("error.log")
        return super().output() + (errors.read_text(errors="replace")[-4000:] if errors.exists() else "")


def _nginx_config(directory: Path, ports: list[int], sites: NginxSites) -> str:
    temp = "\n    ".join(f"{kind}_temp_path {directory / kind};" for kind in ("client_body", "proxy", "fastcgi",
                                                                              "uwsgi", "scgi"))
    return f"""
daemon off;
master_process off;
pid {directory / "nginx.pid"};
error_log {directory / "error.log"} warn;
events {{ worker_connections 512; }}
http {{
    {temp}
    log_format arrivals escape=json
        '{{"port":"$server_port","path":"$uri","run_id":"$http_tickwork_run_id","attempt":"$http_tickwork_attempt"}}';
    access_log {directory / "arrivals.jsonl"} arrivals;
    default_type text/plain;
    {NGINX_KEEPALIVE}
    server {{
        listen 127.0.0.1:{ports[0]};
        root {directory / "www"};
        location = /length {{ return 200 "ok"; }}
        location = /204 {{ return 204; }}
        location = /304 {{ return 304; }}
        # keepalive_timeout 0: this answer carries `Connection: close` and nginx closes after it.
        location = /close {{ keepalive_timeout 0; return 200 "ok"; }}
        location = /big {{ }}
        # The upstream's answer has no length (HTTP/1.0, ended by close): nginx re-frames it as chunked.
        location = /chunked {{ proxy_pass {sites.upstream}/upstream/close; }}
        location = /slow {{ proxy_pass {sites.upstream}/upstream/slow; }}
    }}
    server {{
        listen 127.0.0.1:{ports[1]} ssl;
        ssl_certificate {sites.trusted.cert};
        ssl_certificate_key {sites.trusted.key};
        location / {{ return 200 "ok"; }}
    }}
    server {{
        listen 127.0.0.1:{ports[2]} ssl;
        ssl_certificate {sites.unknown.cert};
        ssl_certificate_key {sites.unknown.key};
        location / {{ return 200 "ok"; }}
    }}
}}
"""
