"""The per-key rate limit through the real API handler and the real Redis, on a pinned clock: time moves
only when the test moves it, so the bucket refills exactly as computed, however slow the machine."""
from __future__ import annotations

import json
import socket
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any, Iterator

import pytest
import redis
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter

from tests.integration.api_client import Api, use_clock, use_settings
from tests.support import FakeClock
from tickwork.dueindex.ratelimit import RateLimiter, decide, key_bucket
from tickwork.store.tenants import create_api_key, create_tenant
from tickwork.wiring import Services, configure
from tickwork.wiring import services as current_services

T0 = datetime(2031, 5, 6, 7, 8, 9, 250_000, tzinfo=timezone.utc)


@pytest.fixture
def clock(api: Api, services: Services) -> FakeClock:
    use_settings(services, allow_private_targets=False, rate_limit_per_second=1, rate_limit_burst=2)
    clock = FakeClock(T0)
    use_clock(clock.time)
    return clock


def limits(reply: Any) -> tuple[str, str, str]:
    return reply.headers["RateLimit-Limit"], reply.headers["RateLimit-Remaining"], reply.headers["RateLimit-Reset"]


def test_a_key_over_its_budget_gets_429_and_recovers_after_retry_after(api: Api, clock: FakeClock) -> None:
    first = api.call("GET", "/jobs")
    assert first.status == 200 and limits(first) == ("2", "1", "1")
    assert limits(api.call("GET", "/jobs")) == ("2", "0", "2")
    refused = api.call("GET", "/jobs")
    assert refused.status == 429, refused.body
    assert refused.body["error"]["code"] == "rate_limited" and refused.body["error"]["field"] is None
    assert refused.headers["Retry-After"] == "1" and limits(refused) == ("2", "0", "2")
    clock.sleep(0.5)
    assert api.call("GET", "/jobs").status == 429  # half a token is not a request
    clock.sleep(0.5)
    recovered = api.call("GET", "/jobs")
    assert recovered.status == 200 and "Retry-After" not in recovered.headers
    # A refused request spends nothing: after Retry-After the next one always gets through.
    refused = api.call("GET", "/jobs")
    clock.sleep(float(refused.headers["Retry-After"]))
    assert api.call("GET", "/jobs").status == 200


def test_a_long_pause_refills_the_bucket_to_its_burst_only(api: Api, clock: FakeClock) -> None:
    for _ in range(2):
        assert api.call("GET", "/jobs").status == 200
    clock.sleep(3600)
    assert [api.call("GET", "/jobs").status for _ in range(3)] == [200, 200, 429]


def test_each_key_has_its_own_bucket(api: Api, clock: FakeClock, db: Any) -> None:
    second = Api(api.handler, create_api_key(db, api.tenant_id), api.tenant_id, api.index)
    assert [api.call("GET", "/jobs").status for _ in range(3)] == [200, 200, 429]
    assert second.call("GET", "/jobs").status == 200


def test_errors_after_authentication_carry_the_headers_too(api: Api, clock: FakeClock) -> None:
    missing = api.call("GET", "/jobs/00000000-0000-0000-0000-000000000000")
    assert missing.status == 404 and limits(missing) == ("2", "1", "1")
    # Without a valid key there is no bucket to tell about.
    assert "RateLimit-Limit" not in api.call("GET", "/jobs", token="tw_nope").headers


def test_many_keys_of_one_tenant_share_its_budget_another_tenant_is_unaffected(
    api: Api, services: Services, db: Any,
) -> None:
    use_settings(services, allow_private_targets=False, rate_limit_per_second=1, rate_limit_burst=2,
                 tenant_rate_limit_per_second=1, tenant_rate_limit_burst=3)
    clock = FakeClock(T0)
    use_clock(clock.time)
    keys = [api] + [Api(api.handler, create_api_key(db, api.tenant_id), api.tenant_id, api.index) for _ in range(4)]
    assert [key.call("GET", "/jobs").status for key in keys] == [200, 200, 200, 429, 429]
    refused = keys[3].call("GET", "/jobs")
    assert refused.body["error"]["code"] == "rate_limited" and "tenant" in refused.body["error"]["message"]
    assert refused.headers["Retry-After"] == "1" and limits(refused) == ("3", "0", "3")
    other_tenant = create_tenant(db, "tenant-b")
    other = Api(api.handler, create_api_key(db, other_tenant), other_tenant, api.index)
    assert [other.call("GET", "/jobs").status for _ in range(2)] == [200, 200]
    clock.sleep(1)
    assert [keys[4].call("GET", "/jobs").status for _ in range(2)] == [200, 429]


def test_a_request_one_bucket_refuses_spends_nothing_from_the_other(api: Api, services: Services, db: Any) -> None:
    use_settings(services, allow_private_targets=False, rate_limit_per_second=1, rate_limit_burst=2,
                 tenant_rate_limit_per_second=1, tenant_rate_limit_burst=3)
    use_clock(FakeClock(T0).time)
    second = Api(api.handler, create_api_key(db, api.tenant_id), api.tenant_id, api.index)
    # The first key's own bucket refuses its third request: the tenant's third token is left for the second.
    assert [api.call("GET", "/jobs").status for _ in range(5)] == [200, 200, 429, 429, 429]
    assert [second.call("GET", "/jobs").status for _ in range(2)] == [200, 429]


def test_a_limit_of_zero_turns_it_off(api: Api, services: Services) -> None:
    use_settings(services, allow_private_targets=False, rate_limit_per_second=0, tenant_rate_limit_per_second=0)
    use_clock(FakeClock(T0).time)
    replies = [api.call("GET", "/jobs") for _ in range(50)]
    assert {r.status for r in replies} == {200} and "RateLimit-Limit" not in replies[0].headers


def test_the_bucket_never_refills_for_a_clock_that_went_back(services: Services) -> None:
    limiter, buckets = RateLimiter(services.redis), [key_bucket(services.settings.namespace, "k", 1, 2)]
    assert limiter.take(buckets, 10_000, {}) is not None
    assert limiter.take(buckets, 10_000, {}).allowed  # type: ignore[union-attr]
    assert not limiter.take(buckets, 5_000, {}).allowed  # type: ignore[union-attr]
    assert not limiter.take(buckets, 10_500, {}).allowed  # type: ignore[union-attr]
    assert limiter.take(buckets, 11_000, {}).allowed  # type: ignore[union-attr]


def test_the_headers_figures() -> None:
    assert decide(True, 39.0, 20, 40).headers() == {
        "RateLimit-Limit": "40", "RateLimit-Remaining": "39", "RateLimit-Reset": "1"}
    assert decide(False, 0.25, 20, 40).headers() == {
        "RateLimit-Limit": "40", "RateLimit-Remaining": "0", "RateLimit-Reset": "2", "Retry-After": "1"}
    assert decide(False, 0.5, 1, 40).retry_after_seconds == 1
    assert decide(False, 0.0, 1, 2).retry_after_seconds == 1


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A loopback port nothing listens on: connecting to it is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        yield probe.getsockname()[1]


def test_without_redis_the_api_keeps_serving_and_logs_it(api: Api, services: Services, refused_port: int,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    down = redis.Redis.from_url(f"redis://127.0.0.1:{refused_port}/0", decode_responses=True)
    configure(replace(current_services(), redis=down))
    reply = api.call("GET", "/jobs")
    assert reply.status == 200, reply.body
    assert "RateLimit-Limit" not in reply.headers
    (record,) = [r for r in caplog.records if r.getMessage() == "rate limiter unavailable: request allowed"]
    # As the API function's Logger writes it: one JSON line with the key's id, never the key.
    line = json.loads(LambdaPowertoolsFormatter().format(record))
    assert (line["level"], line["error_type"]) == ("WARNING", "ConnectionError") and line["key_id"]
    assert api.token not in caplog.text
    down.close()
