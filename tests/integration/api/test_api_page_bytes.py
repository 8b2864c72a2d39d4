"""Pages stay under Lambda's 6 MB response limit: a list stops early, by bytes, and its next_cursor goes on from
there, so paging through large jobs (64K bodies) and their audit entries returns every item once. Real
handler, Postgres and Redis."""
from __future__ import annotations

from typing import Any

import pytest

from tests.integration.api_client import Api, job_body, use_settings
from tickwork.api.models import MAX_BODY_CHARS
from tickwork.api.pagination import MAX_LIMIT
from tickwork.wiring import Services

# A synchronous invocation's response payload: 6 MB. The body sits inside it as a JSON string, escaped again.
LAMBDA_RESPONSE_BYTES = 6 * 1024 * 1024
# Characters JSON escapes (a quote, a backslash, a control character, one outside the BMP): 7 bytes each, on
# average, in the Lambda response, so a 64K body is about 475 KB there, and 200 such jobs would be 95 MB.
HEAVY = ('"\\\x01\U0001F600' * MAX_BODY_CHARS)[:MAX_BODY_CHARS]
JOBS = 30


@pytest.fixture
def large_jobs(api: Api, services: Services) -> list[str]:
    use_settings(services, allow_private_targets=False, rate_limit_per_second=0, tenant_rate_limit_per_second=0)
    return [api.create(name=f"large-{i}", request={"body": HEAVY})["id"] for i in range(JOBS)]


def page_through(api: Api, path: str, **query: str) -> list[dict[str, Any]]:
    """Every item of a list, page by page at the largest limit; each answer under Lambda's limit."""
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(JOBS + 1):
        reply = api.call("GET", path, query={"limit": str(MAX_LIMIT), **query, **({"cursor": cursor} if cursor else {})})
        assert reply.status == 200, reply.body
        assert reply.size < LAMBDA_RESPONSE_BYTES, (path, len(items), reply.size)
        assert reply.body["items"], "a page with a cursor before it holds at least one item"
        items += reply.body["items"]
        cursor = reply.body["next_cursor"]
        if cursor is None:
            return items
    raise AssertionError(f"{path} did not end")


def test_a_page_of_large_jobs_stops_under_the_limit_and_paging_returns_each_once(api: Api,
                                                                                large_jobs: list[str]) -> None:
    jobs = page_through(api, "/jobs")
    assert sorted(job["id"] for job in jobs) == sorted(large_jobs)
    assert all(job["request"]["body"] == HEAVY for job in jobs)
    first = api.call("GET", "/jobs", query={"limit": str(MAX_LIMIT)})
    assert 1 < len(first.body["items"]) < JOBS  # stopped early, by bytes, not by count


def test_audit_entries_of_large_jobs_page_under_the_limit(api: Api, large_jobs: list[str]) -> None:
    entries = page_through(api, "/audit", action="job.created")
    assert sorted(entry["job_id"] for entry in entries) == sorted(large_jobs)
    assert len({entry["id"] for entry in entries}) == JOBS
