"""Fixtures of the API tests: the API handler called as API Gateway calls it, for a first tenant."""
from __future__ import annotations

from typing import Any, Callable

import pytest

from tests.integration.api_client import EVENT_TOKEN, Api, use_settings
from tickwork.dueindex import DueIndex
from tickwork.store.tenants import create_api_key, create_tenant
from tickwork.wiring import Services


@pytest.fixture
def api(services: Services, db: Any, handler: Callable[[str], Any]) -> Api:
    # Production behaviour: the conftest settings allow private targets for the executor tests.
    use_settings(services, allow_private_targets=False)
    tenant_id = create_tenant(db, "tenant-a")
    create_api_key(db, tenant_id, token=EVENT_TOKEN)
    return Api(handler("api"), EVENT_TOKEN, tenant_id, DueIndex(services.redis, services.settings.namespace))
