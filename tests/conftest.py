"""Shared fixtures: real PostgreSQL and Redis (from DATABASE_URL / REDIS_URL, or embedded), isolated per test.

Each test gets its own Postgres schema (migrated from scratch, by a thread that makes the next ones while tests
run: tests/schemas.py) and its own Redis key namespace, so tests never see each other's rows or keys, and a
failed test leaves nothing behind for the next. Test processes of a parallel run (pytest-xdist) share nothing
else: each has its own of these and, without DATABASE_URL / REDIS_URL, its own embedded servers.
"""
from __future__ import annotations

import importlib.util
import json
import os
import tempfile
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import quote

import psycopg
import pytest

from tests import aws, parallel
from tests.schemas import MigratedSchemas, schema_name
from tickwork.models import Dispatch
from tickwork.settings import Settings
from tickwork.store.migrate import migrate
from tickwork.wiring import Services, build_services, configure

ROOT = Path(__file__).resolve().parent.parent
# Metrics are printed as EMF log lines; tests that check them switch them back on.
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
EVENTS = ROOT / "events"


@pytest.hookimpl(trylast=True)  # once the other plugins have changed the items: their node ids are final
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    parallel.group(items)


@pytest.fixture(scope="session")
def servers() -> Iterator[Any]:
    from tickwork_local.services import resolve

    data_dir = Path(tempfile.mkdtemp(prefix="tickwork-test-"))
    embedded = resolve(data_dir, keep_data=False)
    yield embedded
    embedded.close()


def _with_search_path(url: str, schema: str) -> str:
    option = quote(f"-csearch_path={schema}")
    return f"{url}{'&' if '?' in url else '?'}options={option}"


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """moto's server (tests/aws.py), one per test process: the AWS the AWS kinds of target are tested against."""
    yield from aws.moto_server()


@pytest.fixture(scope="session")
def key_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test session's local master key (tickwork.secrets.crypto.LocalWrapper), created on first use."""
    return tmp_path_factory.mktemp("keys") / "master.key"


@contextmanager
def fresh_schema(server_url: str) -> Iterator[str]:
    """The URL of a schema of its own on the test server, never migrated (a new stack's database); dropped after."""
    schema = schema_name()
    _create_schema(server_url, schema)
    try:
        yield _with_search_path(server_url, schema)
    finally:
        _drop_schema(server_url, schema)


def _create_schema(server_url: str, schema: str) -> None:
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')


def _drop_schema(server_url: str, schema: str) -> None:
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


def _migrated_schema(server_url: str, schema: str) -> None:
    """`schema` made and migrated from scratch, as the deploy migrates a new stack's database."""
    _create_schema(server_url, schema)
    try:
        with psycopg.connect(_with_search_path(server_url, schema), autocommit=True) as conn:
            migrate(conn)
    except BaseException:
        _drop_schema(server_url, schema)
        raise


@contextmanager
def own_database(server_url: str, prefix: str = "tw") -> Iterator[str]:
    """The URL of a database of its own on the test server, dropped after (its connections ended): for what
    waits on every transaction of its database (a concurrent index build) or is shared by processes."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield psycopg.conninfo.make_conninfo(server_url, dbname=name)
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def migrated_schemas(servers: Any) -> Iterator[MigratedSchemas]:
    """This test process's maker of migrated schemas (tests/schemas.py): made ahead, dropped after."""
    url = servers.database_url
    schemas = MigratedSchemas(lambda schema: _migrated_schema(url, schema), lambda schema: _drop_schema(url, schema))
    yield schemas
    schemas.close()


@pytest.fixture
def database_url(servers: Any, migrated_schemas: MigratedSchemas) -> Iterator[str]:
    """A schema of the test's own, migrated from scratch (ahead of the test), dropped after it."""
    schema = migrated_schemas.take()
    try:
        yield _with_search_path(servers.database_url, schema)
    finally:
        migrated_schemas.give_back(schema)


@pytest.fixture
def settings(servers: Any, database_url: str, key_file: Path) -> Iterator[Settings]:
    namespace = f"tickwork-test-{uuid.uuid4().hex[:12]}"
    yield Settings(
        database_url=database_url,
        redis_url=servers.redis_url,
        namespace=namespace,
        allow_private_targets=True,
        key_file=str(key_file),
    )
    import redis

    client = redis.Redis.from_url(servers.redis_url)
    keys = list(client.scan_iter(match="{" + namespace + "[}/]*"))  # the base tag and the shards' tags
    if keys:
        client.delete(*keys)
    client.close()


class RecordingInvoker:
    """Collects dispatches instead of running them: lets a test decide when (and how often) executors run."""

    def __init__(self) -> None:
        self.dispatches: list[Dispatch] = []

    def invoke(self, dispatches: Any) -> None:
        self.dispatches.extend(dispatches)


@pytest.fixture
def invoker() -> RecordingInvoker:
    return RecordingInvoker()


@pytest.fixture
def services(settings: Settings, invoker: RecordingInvoker) -> Iterator[Services]:
    svc = build_services(settings, invoker=invoker)
    configure(svc)
    yield svc
    configure(None)
    svc.close()


@pytest.fixture
def db(services: Services) -> Iterator[psycopg.Connection]:
    with services.db.connection() as conn:
        yield conn


def load_handler_module(name: str) -> Any:
    """Import functions/<name>/app.py under a unique module name, exactly as Lambda loads `app.handler`."""
    path = ROOT / "functions" / name / "app.py"
    spec = importlib.util.spec_from_file_location(f"tickwork_fn_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def handler() -> Callable[[str], Callable[[dict[str, Any], Any], Any]]:
    return lambda name: load_handler_module(name).handler


def load_event(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text())


# A held request is answered after this long even if the test never opens its gate (a failing test).
GATE_TIMEOUT_SECONDS = 30.0


class Target:
    """A real HTTP server on loopback that records every request and answers from a script of statuses.

    By default it keeps connections alive and answers with a Content-Length, as most webhook endpoints;
    `stock=True` answers as Python's http.server does out of the box: HTTP/1.0, the head and then the
    body in a separate write, no Content-Length, the connection closed after each answer."""

    def __init__(self, stock: bool = False) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.requests: list[dict[str, Any]] = []
        self.statuses: list[int] = []
        self.default_status = 200
        self.delay_seconds = 0.0
        self.response_body = b"ok"
        self.response_headers: dict[str, str] = {}
        self.path_delays: dict[str, float] = {}  # extra delay before answering a request for this path
        # A request arriving for one of these paths is held until its event is set (a run kept in progress).
        self.gates: dict[str, threading.Event] = {}
        self.connections = 0  # TCP connections accepted (keep-alive reuses them)
        self._sockets: list[Any] = []
        self._lock = threading.Lock()
        target = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0" if stock else "HTTP/1.1"  # keep-alive, as most webhook endpoints

            def setup(self) -> None:
                super().setup()
                with target._lock:
                    target.connections += 1
                    target._sockets.append(self.connection)

            def _serve(self) -> None:
                import time

                arrived = time.time()
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                with target._lock:
                    target.requests.append({"at": arrived, "method": self.command, "path": self.path,
                                            "headers": dict(self.headers), "body": body.decode()})
                    status = target.statuses.pop(0) if target.statuses else target.default_status
                    gate = target.gates.get(self.path)
                if gate is not None:
                    gate.wait(GATE_TIMEOUT_SECONDS)
                if target.delay_seconds or self.path in target.path_delays:
                    time.sleep(target.delay_seconds + target.path_delays.get(self.path, 0.0))
                self.send_response(status)
                if not stock:
                    self.send_header("content-length", str(len(target.response_body)))
                for name, value in target.response_headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(target.response_body)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

            def log_message(self, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            request_queue_size = 128  # a group opens its connections at once; the default 5 drops SYNs

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def drop_connections(self) -> None:
        """Close every connection accepted so far from the server's side, as a target ending idle ones does."""
        import socket

        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        # Keep-alive connections outlive the listener: end them, so no client reuses one after this test.
        self.drop_connections()


@pytest.fixture
def target() -> Iterator[Target]:
    server = Target()
    yield server
    server.close()
