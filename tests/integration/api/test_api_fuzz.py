"""A bounded property-based fuzz of the API: schemathesis generates requests from the OpenAPI document the
API serves, valid and invalid, and sends them over HTTP through the local API Gateway to the API Lambda.
Every answer must be a non-5xx response the document declares, in the shape it declares.

The document is loaded at import, when no server runs yet (schemathesis' lazy `from_fixture` loader does
not run on pytest 9.2), from the function that serves it; a test checks that the server serves that one.

Deterministic (derandomized, no example database), so a red run reproduces and CI stays stable.
Generated data rarely makes a valid job (a random string is seldom a schedule), so a walk through every
route with real ids checks the success responses the same way.

Run alone: .venv/bin/python -m pytest -q -p no:cacheprovider tests/integration/api/test_api_fuzz.py
"""
from __future__ import annotations

import json
import time
import urllib.request
from typing import Any, Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.integration.api_client import EVENT_TOKEN, job_body, use_settings
from tickwork.api.app import openapi_json
from tickwork.dispatch.poller import Poller
from tickwork.wiring import Services
from tickwork_local.functions import FUNCTIONS_DIR, POLLER_TIMEOUT_SECONDS, LambdaFunction, load_handler
from tickwork_local.server import ApiServer
from tickwork_local.ticker import Ticker

# schemathesis' own strategies draw from the random module, which Hypothesis seeds and only warns about.
pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisDeprecationWarning")

# Per operation, for both valid and invalid data: ~10 operations make a few hundred requests in all.
EXAMPLES_PER_OPERATION = 25
# Not positive_data_acceptance: the document cannot say which strings are schedules or public URLs, so
# schema-valid data is often (rightly) a 400.
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_headers_conformance,
          response_schema_conformance, negative_data_rejection]


AUTH = {"Authorization": f"Bearer {EVENT_TOKEN}"}
# Without a seed schemathesis draws a random one per run, whatever Hypothesis' derandomize says.
SEED = 20261201
# The key through the document's own security scheme, so schemathesis knows which requests carry it.
CONFIG = SchemathesisConfig.from_dict({"seed": SEED, "auth": {"openapi": {"apiKey": {"bearer": EVENT_TOKEN}}}})
schema = schemathesis.openapi.from_dict(json.loads(openapi_json()), config=CONFIG)


@pytest.fixture
def ticking(services: Services) -> Iterator[None]:
    """The poller ticking every second, as in production (its dispatches only recorded), so GET /health is a
    200: a first tick now, then the local runtime's ticker."""
    Poller(services).tick(int(time.time() * 1000))
    ticker = Ticker(LambdaFunction("tickwork-poller", load_handler(FUNCTIONS_DIR, "poller"), POLLER_TIMEOUT_SECONDS))
    ticker.start()
    yield
    ticker.stop(timeout=10)
@pytest.fixture(autouse=True)
def unthrottled(api: Any, services: Any) -> None:
    """A few hundred requests in seconds from one key: a bucket that never runs dry, so answers are not 429s
    yet carry the RateLimit-* headers the document declares."""
    use_settings(services, allow_private_targets=False, rate_limit_per_second=100_000, rate_limit_burst=1_000_000)


def test_the_fuzzed_document_is_the_one_the_server_serves(api_server: ApiServer) -> None:
    with urllib.request.urlopen(f"{api_server.url}/openapi.json", timeout=10) as response:
        assert json.loads(response.read()) == schema.raw_schema


@schema.parametrize()
@settings(max_examples=EXAMPLES_PER_OPERATION, derandomize=True, database=None, deadline=None,
          phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
def test_the_api_answers_every_generated_request_as_documented(
    api_server: ApiServer, ticking: None, case: schemathesis.Case,
) -> None:
    case.call_and_validate(base_url=api_server.url, checks=CHECKS, timeout=30)


def test_every_route_answers_a_valid_request_as_documented(api_server: ApiServer, ticking: None) -> None:
    def call(method: str, path: str, status: int, **case: Any) -> Any:
        headers = {**AUTH, **case.pop("headers", {})}
        response = schema[path][method].Case(headers=headers, **case).call_and_validate(
            base_url=api_server.url, checks=CHECKS, timeout=30)
        assert response.status_code == status, response.text
        return response.json() if response.content else None

    body = job_body(start_at="2030-01-01T00:00:00.5+02:00", end_at="8999-12-31T23:59:59.999Z",
                    tags=["env:prod", "team=data"], description="fuzzed")
    first = call("POST", "/jobs", 201, body=body)
    call("POST", "/jobs", 201, body=job_body(schedule="rate(5 minutes)", request={"body": None}))
    page = call("GET", "/jobs", 200, query={"limit": 1})
    call("GET", "/jobs", 200, query={"limit": 1, "cursor": page["next_cursor"]})
    job = {"job_id": first["id"]}
    call("GET", "/jobs/{job_id}", 200, path_parameters=job)
    call("PATCH", "/jobs/{job_id}", 200, path_parameters=job, body={"end_at": None, "retry": {"max_attempts": 5}})
    call("POST", "/jobs/{job_id}/pause", 200, path_parameters=job)
    call("POST", "/jobs/{job_id}/resume", 200, path_parameters=job)
    execution = call("POST", "/jobs/{job_id}/run", 202, path_parameters=job)
    call("GET", "/jobs/{job_id}/executions", 200, path_parameters=job)
    call("GET", "/executions/{execution_id}", 200, path_parameters={"execution_id": execution["id"]})
    call("GET", "/jobs", 200, query={"tag": ["env:prod", "team=data"], "status": ["active"], "name_prefix": "n"})
    listed = call("GET", "/executions", 200, query={"status": ["queued", "running"], "job_id": first["id"],
                                                      "since": "2020-01-01T00:00:00Z", "limit": 1})
    assert [item["id"] for item in listed["items"]] == [execution["id"]]
    call("GET", "/stats", 200, query={"window": 60})
    assert call("GET", "/health", 200)["status"] == "ok"
    call("POST", "/schedules/preview", 200, body={"schedule": "every weekday at 17:00", "timezone": "Asia/Tokyo",
                                                  "after": "8999-12-01T00:00:00Z", "count": 100})
    call("DELETE", "/jobs/{job_id}", 204, path_parameters=job)
    call("GET", "/jobs/{job_id}", 404, path_parameters=job)
    key = call("POST", "/api-keys", 201, body={"name": "ci"})
    call("GET", "/api-keys", 200)
    call("DELETE", "/api-keys/{key_id}", 204, path_parameters={"key_id": key["id"]})
    call("DELETE", "/api-keys/{key_id}", 404, path_parameters={"key_id": key["id"]})
    call("POST", "/jobs", 201, body=job_body(), headers={"Idempotency-Key": "walk-1"})
