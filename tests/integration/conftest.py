"""Fixtures of the API tests: the API handler called as API Gateway calls it, for a first tenant."""
from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest

from tests.integration.api_client import EVENT_TOKEN, Api, use_settings
from tickwork.dueindex.index import DueIndex
from tickwork.store.tenants import create_api_key, create_tenant
from tickwork.wiring import Services
from tickwork_local.functions import API_TIMEOUT_SECONDS, FUNCTIONS_DIR, LambdaFunction, load_handler
from tickwork_local.server import ApiServer


@pytest.fixture
def api(services: Services, db: Any, handler: Callable[[str], Any]) -> Api:
    # Production behaviour: the conftest settings allow private targets for the executor tests.
    use_settings(services, allow_private_targets=False)
    tenant_id = create_tenant(db, "tenant-a")
    create_api_key(db, tenant_id, token=EVENT_TOKEN)
    return Api(handler("api"), EVENT_TOKEN, tenant_id, DueIndex(services.redis, services.settings.namespace, services.settings.due_index_shards))


@pytest.fixture
def api_server(api: Api) -> Iterator[ApiServer]:
    """The local API Gateway (a real HTTP server) in front of the API Lambda, for the tenant of `api`.
    Only the API runs: no poller, so nothing a test creates is ever sent anywhere."""
    function = LambdaFunction("tickwork-api", load_handler(FUNCTIONS_DIR, "api"), API_TIMEOUT_SECONDS)
    server = ApiServer("127.0.0.1", 0, function)
    server.start()
    yield server
    server.stop(timeout=5)
