"""GET /health, GET /docs and the committed OpenAPI document: the real handler and the local API Gateway, with
real Postgres and Redis, and real sockets standing in for a store that refuses or hangs."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

import pytest
import redis

import tickwork
from tests.integration.api_client import Api, Reply
from tickwork.api.spec import committed_text
from tickwork.dispatch.poller import Poller
from tickwork.dueindex.index import DueIndex
from tickwork.dispatch.health import ERROR, OK, TIMEOUT, Prober
from tickwork.wiring import Services, configure, connect_db
from tickwork_local.cluster import without_faketime
from tickwork_local.server import ApiServer

ROOT = Path(__file__).resolve().parents[3]


def wall_ms() -> int:
    return int(time.time() * 1000)


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections (the kernel completes the handshake) and never answers: a hung store."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    yield listener.getsockname()[1]
    listener.close()  # resets the connections still waiting, so a hung probe ends


@pytest.fixture
def refused_port() -> int:
    """A port nothing listens on (bound, then closed): connecting is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class PageApi(Api):
    """The API, for answers that are not JSON (pages, scripts)."""

    @staticmethod
    def _reply(result: dict[str, Any]) -> Reply:
        return Reply(result["statusCode"], None, result.get("headers") or {}, result.get("body") or "")


@pytest.fixture
def pages(api: Api) -> PageApi:
    return PageApi(api.handler, api.token, api.tenant_id, api.index)


def with_redis(services: Services, client: Any) -> None:
    configure(Services(services.settings, services.db, client, services.invoker))


# ---------------------------------------------------------------- GET /health

def test_health_is_ok_right_after_a_tick_and_needs_no_key(api: Api, services: Services) -> None:
    Poller(services).tick(wall_ms())

    reply = api.call("GET", "/health", token=None)

    assert reply.status == 200, reply.body
    assert reply.body["status"] == "ok"
    assert (reply.body["postgres"], reply.body["redis"]) == (OK, OK)
    assert 0 <= reply.body["last_tick_age_seconds"] <= 5
    assert reply.body["version"] == tickwork.__version__  # which release answers, during an upgrade
    assert reply.headers["Cache-Control"] == "no-store"


def test_a_poller_that_stopped_ticking_makes_health_degraded(api: Api, services: Services) -> None:
    Poller(services).tick(wall_ms() - 60_000)  # the last tick the poller made, a minute ago by its clock

    reply = api.call("GET", "/health", token=None)

    assert reply.status == 503
    assert reply.body["status"] == "degraded" and reply.body["redis"] == OK and reply.body["postgres"] == OK
    assert reply.body["last_tick_age_seconds"] >= 60


def test_no_tick_ever_recorded_is_degraded(api: Api) -> None:
    reply = api.call("GET", "/health", token=None)
    assert reply.status == 503
    assert reply.body == {"status": "degraded", "postgres": OK, "redis": OK, "last_tick_age_seconds": None,
                          "version": tickwork.__version__}


def test_a_refusing_redis_is_degraded_and_nothing_of_the_url_leaks(
    api: Api, services: Services, refused_port: int, caplog: pytest.LogCaptureFixture,
) -> None:
    Poller(services).tick(wall_ms())
    with_redis(services, redis.Redis.from_url(f"redis://:hunter2secret@127.0.0.1:{refused_port}/0"))

    reply = api.call("GET", "/health", token=None)

    assert reply.status == 503
    assert reply.body == {"status": "degraded", "postgres": OK, "redis": ERROR, "last_tick_age_seconds": None,
                          "version": tickwork.__version__}
    assert "hunter2secret" not in reply.raw and "hunter2secret" not in caplog.text


def test_a_refusing_postgres_is_degraded(api: Api, services: Services, refused_port: int) -> None:
    Poller(services).tick(wall_ms())
    settings = replace(services.settings, database_url=f"postgresql://postgres@127.0.0.1:{refused_port}/postgres")
    pool = connect_db(settings)
    try:
        configure(Services(settings, pool, services.redis, services.invoker))
        reply = api.call("GET", "/health", token=None)
    finally:
        pool.close()

    assert reply.status == 503
    assert reply.body["status"] == "degraded" and reply.body["redis"] == OK
    assert reply.body["postgres"] in (ERROR, TIMEOUT)  # the pool's own wait and the probe's end together


def test_a_hung_redis_is_a_timeout_within_the_probe_budget(services: Services, silent_port: int) -> None:
    client = redis.Redis.from_url(f"redis://127.0.0.1:{silent_port}/0")  # no socket timeout: it would wait forever
    prober = Prober(timeout=0.5)
    try:
        started = time.monotonic()
        first = prober.check(services.db, DueIndex(client), wall_ms())
        elapsed = time.monotonic() - started
        # The probe is still out: the next check does not queue another one behind it.
        second = prober.check(services.db, DueIndex(client), wall_ms())
    finally:
        prober.close()

    assert (first.redis, first.postgres, first.ok) == (TIMEOUT, OK, False)
    assert elapsed < 5  # bounded by the 0.5 s budget; without it the check would never return
    assert second.redis == TIMEOUT and second.postgres == OK


def test_health_is_served_over_http_by_the_local_server(api_server: ApiServer, services: Services) -> None:
    Poller(services).tick(wall_ms())
    with urllib.request.urlopen(f"{api_server.url}/health", timeout=10) as response:
        assert response.status == 200
        assert json.loads(response.read())["status"] == "ok"


# ---------------------------------------------------------------- GET /docs

def test_the_docs_page_needs_no_key_and_loads_only_same_origin_files(pages: PageApi) -> None:
    page = pages.call("GET", "/docs", token=None)

    assert page.status == 200
    assert page.headers["Content-Type"].startswith("text/html")
    csp = page.headers["Content-Security-Policy"]
    assert "script-src 'self';" in csp and "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert "<script>" not in page.raw and "http" not in page.raw.replace("http-equiv", "")  # no inline code, no CDN
    for asset, marker in (("docs/swagger-ui-bundle.js", "SwaggerUIBundle"), ("docs/swagger-ui.css", ".swagger-ui"),
                          ("docs/init.js", "openapi.json")):
        assert asset in page.raw
        reply = pages.call("GET", f"/{asset}", token=None)
        assert reply.status == 200 and marker in reply.raw, asset
        assert "Content-Security-Policy" in reply.headers


def test_the_docs_init_script_keeps_the_key_out_of_storage_and_calls_no_one_else(pages: PageApi) -> None:
    script = pages.call("GET", "/docs/init.js", token=None).raw
    assert "persistAuthorization: false" in script
    assert "validatorUrl: null" in script  # nothing sent to swagger.io's validator


def test_the_docs_assets_come_compressed_over_http(api_server: ApiServer) -> None:
    request = urllib.request.Request(f"{api_server.url}/docs/swagger-ui-bundle.js",
                                     headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.headers["Content-Encoding"] == "gzip"
        script = gzip.decompress(response.read()).decode()
    assert "SwaggerUIBundle" in script
    with urllib.request.urlopen(f"{api_server.url}/docs", timeout=10) as response:
        assert response.status == 200 and b'id="swagger-ui"' in response.read()


BROWSER_SCRIPT = ROOT / "tests" / "integration" / "browser" / "try_docs.mjs"


def _node_with_websocket() -> list[str] | None:
    node = shutil.which("node")
    if node is None or shutil.which(os.environ.get("CHROMIUM", "chromium")) is None:
        return None
    major = int(subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip("v\n").split(".")[0])
    return None if major < 20 else [node, *(["--experimental-websocket"] if major < 22 else [])]


@pytest.mark.skipif(_node_with_websocket() is None, reason="needs Chromium and Node 20+ (Debian: chromium, nodejs)")
def test_a_user_can_authorize_and_try_a_call_in_a_real_browser(api: Api, api_server: ApiServer) -> None:
    # Headless Chromium under the page's own Content-Security-Policy: Swagger UI must render, take the
    # key, send it as a Bearer header and show the answer, with no policy violation on the way.
    api.create(name="seen-from-the-docs")
    node = _node_with_websocket()
    assert node is not None
    run = subprocess.run([*node, str(BROWSER_SCRIPT), api_server.url, api.token], capture_output=True, text=True,
                         timeout=240, env=without_faketime())
    assert run.returncode == 0, run.stdout + run.stderr[-2000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])

    assert seen["lock"].split()[-1] == "locked"  # Swagger UI holds a key
    assert seen["status"].strip() == "200"
    assert json.loads(seen["body"])["items"][0]["name"] == "seen-from-the-docs"
    assert "-H 'Authorization: Bearer <key>'" in seen["curl"]
    assert seen["violations"] == []
    assert seen["stored"] == []  # the key is not kept in the browser's storage


def test_the_document_offers_the_key_scheme_swagger_ui_asks_for(api: Api) -> None:
    document = api.call("GET", "/openapi.json", token=None).body
    assert document["components"]["securitySchemes"]["apiKey"] == {
        "type": "http", "scheme": "bearer", "description": "A Tickwork API key."}
    assert document["paths"]["/health"]["get"]["security"] == [{}]  # public: no key asked
    assert {"/executions", "/stats", "/health"} <= set(document["paths"])


# ---------------------------------------------------------------- docs/openapi.json

def test_the_committed_openapi_document_is_current() -> None:
    committed = (ROOT / "docs" / "openapi.json").read_text(encoding="utf-8")
    assert committed == committed_text(), "docs/openapi.json is stale: run `make openapi` and commit it"
