"""The API on bad input: one error shape, the field named, the right status, never a 500, never a secret echoed."""
from __future__ import annotations

from typing import Any, Callable

import pytest

from tests.conftest import load_event
from tests.integration.api_client import EVENT_TOKEN, Api, Reply, job_body, use_settings
from tickwork.wiring import Services

SECRET = "s3cr3t-value-never-echoed"
UUID = "5f1c7e0a-3b9d-4c2e-9a51-2d8f0b6e4c17"


def assert_error(reply: Reply, status: int, code: str, field: str | None) -> None:
    assert reply.status == status, reply.body
    assert set(reply.body) == {"error"}
    assert set(reply.body["error"]) == {"code", "message", "field"}
    assert (reply.body["error"]["code"], reply.body["error"]["field"]) == (code, field), reply.body
    assert reply.body["error"]["message"]


INVALID_JOBS = [
    pytest.param(job_body(schedule="every blue moon"), "invalid_schedule", "schedule", id="bad-schedule"),
    pytest.param(job_body(schedule="0 0 25 * * *"), "invalid_schedule", "schedule", id="hour-out-of-range"),
    pytest.param(job_body(timezone="Mars/Olympus_Mons"), "invalid_schedule", "timezone", id="bad-time-zone"),
    pytest.param(job_body(schedule="* * * *"), "invalid_schedule", "schedule", id="wrong-field-count"),
    pytest.param(job_body(schedule="*/0 * * * *"), "invalid_schedule", "schedule", id="zero-step"),
    pytest.param(job_body(schedule="0 9 * * FUNDAY"), "invalid_schedule", "schedule", id="unknown-name"),
    pytest.param(job_body(schedule="0 0 30 2 *"), "invalid_schedule", "schedule", id="never-fires"),
    pytest.param(job_body(schedule="at(2001-01-01T00:00:00)"), "invalid_schedule", "schedule", id="at-in-the-past"),
    pytest.param(job_body(request={"url": "ftp://example.com/file"}), "invalid_request", "request.url", id="ftp"),
    pytest.param(job_body(request={"url": "https:///no-host"}), "invalid_request", "request.url", id="no-host"),
    pytest.param(job_body(request={"url": "not a url"}), "invalid_request", "request.url", id="not-a-url"),
    pytest.param(job_body(request={"url": "http://169.254.169.254/latest/meta-data/"}), "unsafe_target",
                 "request.url", id="metadata-endpoint"),
    pytest.param(job_body(request={"url": "http://[::1]:8080/"}), "unsafe_target", "request.url", id="ipv6-loopback"),
    pytest.param(job_body(request={"url": "http://localhost/"}), "unsafe_target", "request.url", id="localhost"),
    pytest.param(job_body(request={"url": f"https://user:{SECRET}@example.com/"}), "invalid_request", "request.url",
                 id="credentials-in-url"),
    pytest.param(job_body(request={"url": "https://example.com/" + "a" * 2100}), "invalid_request", "request.url",
                 id="url-too-long"),
    pytest.param({k: v for k, v in job_body().items() if k != "name"}, "invalid_request", "name", id="missing-name"),
    pytest.param(job_body(name=""), "invalid_request", "name", id="empty-name"),
    pytest.param(job_body(request={"url": None}), "invalid_request", "request.url", id="null-url"),
    pytest.param({**job_body(), "request": {"method": "GET"}}, "invalid_request", "request.url", id="missing-url"),
    pytest.param({**job_body(), "schedual": "* * * * *"}, "invalid_request", "schedual", id="unknown-field"),
    pytest.param(job_body(request={"follow_redirects": True}), "invalid_request", "request.follow_redirects",
                 id="unknown-nested-field"),
    pytest.param(job_body(request={"method": "FETCH"}), "invalid_request", "request.method", id="bad-method"),
    pytest.param(job_body(request={"timeout_seconds": 999}), "invalid_request", "request.timeout_seconds",
                 id="timeout-over-cap"),
    pytest.param(job_body(request={"timeout_seconds": 0}), "invalid_request", "request.timeout_seconds",
                 id="timeout-zero"),
    pytest.param(job_body(request={"headers": {"Bad Name": "x"}}), "invalid_request", "request.headers.Bad Name",
                 id="header-name"),
    pytest.param(job_body(request={"headers": {"X-Token": f"{SECRET}\r\nX-Injected: 1"}}), "invalid_request",
                 "request.headers.X-Token", id="header-injection"),
    pytest.param(job_body(request={"headers": {"Host": "internal.example"}}), "invalid_request",
                 "request.headers.Host", id="host-header"),
    pytest.param(job_body(request={"headers": {"Tickwork-Run-Id": "forged"}}), "invalid_request",
                 "request.headers.Tickwork-Run-Id", id="run-header"),
    pytest.param(job_body(retry={"strategy": "random"}), "invalid_request", "retry.strategy", id="retry-strategy"),
    pytest.param(job_body(retry={"max_attempts": 0}), "invalid_request", "retry.max_attempts", id="retry-attempts"),
    pytest.param(job_body(retry={"delay_seconds": "soon"}), "invalid_request", "retry.delay_seconds",
                 id="retry-delay"),
    pytest.param(job_body(start_at="2030-01-01T00:00:00"), "invalid_request", "start_at", id="naive-start"),
    pytest.param(job_body(start_at="2030-01-02T00:00:00Z", end_at="2030-01-01T00:00:00Z"), "invalid_schedule",
                 "end_at", id="end-before-start"),
    pytest.param(job_body(end_at="2001-01-01T00:00:00Z"), "invalid_schedule", "end_at", id="end-in-past"),
]


@pytest.mark.parametrize(("body", "code", "field"), INVALID_JOBS)
def test_invalid_job_is_a_400_naming_the_field(api: Api, body: dict[str, Any], code: str, field: str) -> None:
    reply = api.call("POST", "/jobs", body)
    assert_error(reply, 400, code, field)
    assert SECRET not in reply.raw
    assert api.call("GET", "/jobs").body["items"] == []


def test_private_targets_are_accepted_when_the_deployment_allows_them(api: Api, services: Services) -> None:
    use_settings(services, allow_private_targets=True)
    reply = api.call("POST", "/jobs", job_body(request={"url": "http://10.0.0.8:8080/hook"}))
    assert reply.status == 201, reply.body


def test_errors_never_echo_a_secret_header(api: Api) -> None:
    body = job_body(schedule="nonsense", request={"headers": {"Authorization": f"Bearer {SECRET}"}})
    reply = api.call("POST", "/jobs", body)
    assert_error(reply, 400, "invalid_schedule", "schedule")
    assert SECRET not in reply.raw


@pytest.mark.parametrize(("raw_body", "code"), [
    ('{"name": "x",', "invalid_json"),
    ("not json at all", "invalid_json"),
    ("[]", "invalid_request"),
    ('"a string"', "invalid_request"),
])
def test_a_body_that_is_not_a_json_object_is_a_400(api: Api, raw_body: str, code: str) -> None:
    assert_error(api.call("POST", "/jobs", raw_body=raw_body), 400, code, "body")


def test_a_missing_body_is_a_400(api: Api) -> None:
    assert_error(api.call("POST", "/jobs"), 400, "invalid_request", "body")


def test_a_non_json_content_type_is_a_415(api: Api) -> None:
    reply = api.call("POST", "/jobs", raw_body="name=x", content_type="text/plain")
    assert_error(reply, 415, "unsupported_media_type", "body")


@pytest.mark.parametrize(("query", "field"), [
    ({"limit": "201"}, "limit"),
    ({"limit": "0"}, "limit"),
    ({"limit": "many"}, "limit"),
    ({"cursor": "definitely-not-a-cursor"}, "cursor"),
    ({"cursor": "am9ic3xub3QtYS1kYXRlfHg"}, "cursor"),  # base64 of a well-framed but invalid position
])
def test_bad_list_parameters_are_a_400(api: Api, query: dict[str, str], field: str) -> None:
    assert_error(api.call("GET", "/jobs", query=query), 400, "invalid_request", field)


def test_a_jobs_cursor_is_refused_by_the_executions_list(api: Api) -> None:
    for i in range(2):
        api.create(name=f"job-{i}")
    page = api.call("GET", "/jobs", query={"limit": "1"}).body
    job_id = page["items"][0]["id"]
    reply = api.call("GET", f"/jobs/{job_id}/executions", query={"cursor": page["next_cursor"]})
    assert_error(reply, 400, "invalid_request", "cursor")


@pytest.mark.parametrize(("patch", "code", "field"), [
    ({"name": None}, "invalid_request", "name"),
    ({"schedule": None}, "invalid_request", "schedule"),
    ({"request": {"url": None}}, "invalid_request", "request.url"),
    ({"request": {"url": "http://127.0.0.1/"}}, "unsafe_target", "request.url"),
    ({"retry": {"strategy": None}}, "invalid_request", "retry.strategy"),
    ({"status": "paused"}, "invalid_request", "status"),
    ({"schedule": "tomorrow-ish"}, "invalid_schedule", "schedule"),
    ({"timezone": "Nowhere/Land"}, "invalid_schedule", "timezone"),
])
def test_invalid_patch_is_a_400_and_changes_nothing(api: Api, patch: dict[str, Any], code: str, field: str) -> None:
    job = api.create()
    assert_error(api.call("PATCH", f"/jobs/{job['id']}", patch), 400, code, field)
    assert api.call("GET", f"/jobs/{job['id']}").body == job


@pytest.mark.parametrize(("body", "field"), [
    ({"schedule": "0 0 * * * *", "count": 101}, "count"),
    ({"schedule": "0 0 * * * *", "count": 0}, "count"),
    ({"schedule": "0 0 * * * *", "after": "yesterday"}, "after"),
    ({"schedule": "whenever"}, "schedule"),
    ({"schedule": "0 0 * * * *", "timezone": "Atlantis/Capital"}, "timezone"),
    ({"count": 3}, "schedule"),
])
def test_invalid_preview_is_a_400_naming_the_field(api: Api, body: dict[str, Any], field: str) -> None:
    reply = api.call("POST", "/schedules/preview", body)
    assert reply.status == 400, reply.body
    assert reply.body["error"]["field"] == field


@pytest.mark.parametrize("token", [None, "", "tw_unknown_key", f"{EVENT_TOKEN}x"])
def test_missing_or_unknown_key_is_a_401(api: Api, token: str | None) -> None:
    reply = api.call("GET", "/jobs", token=token)
    assert_error(reply, 401, "unauthorized", None)
    assert reply.headers.get("WWW-Authenticate", "").startswith("Bearer")


@pytest.mark.parametrize("header", [f"Basic {EVENT_TOKEN}", EVENT_TOKEN, "Bearer", "Bearer   ", f"Token {EVENT_TOKEN}"])
def test_only_the_bearer_scheme_is_accepted(api: Api, handler: Callable[[str], Any], header: str) -> None:
    event = load_event("api_list_jobs.json")
    event["headers"]["authorization"] = header
    assert handler("api")(event, None)["statusCode"] == 401


def test_the_scheme_name_is_case_insensitive(api: Api, handler: Callable[[str], Any]) -> None:
    event = load_event("api_list_jobs.json")
    event["headers"]["authorization"] = f"bearer {EVENT_TOKEN}"
    assert handler("api")(event, None)["statusCode"] == 200


@pytest.mark.parametrize(("method", "path"), [
    ("GET", f"/jobs/{UUID}"),
    ("POST", f"/jobs/{UUID}/run"),
    ("GET", "/executions/" + UUID),
])
def test_a_valid_key_is_required_before_anything_is_looked_up(api: Api, method: str, path: str) -> None:
    assert api.call(method, path, token="tw_wrong").status == 401


@pytest.mark.parametrize(("method", "path"), [
    ("GET", "/jobs/not-a-uuid"),
    ("PATCH", "/jobs/not-a-uuid"),
    ("DELETE", "/jobs/123"),
    ("POST", "/jobs/zzz/pause"),
    ("POST", "/jobs/zzz/resume"),
    ("POST", "/jobs/zzz/run"),
    ("GET", "/jobs/zzz/executions"),
    ("GET", "/executions/'; DROP TABLE jobs; --"),
    ("GET", f"/jobs/{UUID}"),
    ("GET", f"/executions/{UUID}"),
])
def test_unknown_or_malformed_ids_are_a_404(api: Api, method: str, path: str) -> None:
    body = {"name": "x"} if method == "PATCH" else None
    assert_error(api.call(method, path, body), 404, "not_found", None)


@pytest.mark.parametrize(("method", "path"), [
    ("GET", "/"),
    ("GET", "/nope"),
    ("GET", f"/jobs/{UUID}/nope"),
    ("POST", "/schedules"),
])
def test_unknown_route_is_a_404_in_the_error_shape(api: Api, method: str, path: str) -> None:
    assert_error(api.call(method, path, {} if method == "POST" else None), 404, "not_found", None)


@pytest.mark.parametrize(("method", "path", "allowed"), [
    ("PUT", "/jobs", "GET, POST"),
    ("DELETE", "/jobs", "GET, POST"),
    ("PUT", f"/jobs/{UUID}", "DELETE, GET, PATCH"),
    ("GET", f"/jobs/{UUID}/run", "POST"),
    ("GET", "/schedules/preview", "POST"),
])
def test_wrong_method_is_a_405_listing_the_allowed_ones(api: Api, method: str, path: str, allowed: str) -> None:
    reply = api.call(method, path)
    assert_error(reply, 405, "method_not_allowed", None)
    assert reply.headers["Allow"] == allowed


def test_an_interval_below_the_configured_minimum_is_a_400(api: Api, services: Services) -> None:
    use_settings(services, allow_private_targets=False, min_interval_seconds=30)
    reply = api.call("POST", "/jobs", job_body(schedule="*/10 * * * * *"))
    assert_error(reply, 400, "invalid_schedule", "schedule")
    assert "minimum" in reply.body["error"]["message"]
    assert api.call("POST", "/jobs", job_body(schedule="*/30 * * * * *")).status == 201


def test_a_target_port_the_deployment_cannot_reach_is_a_400_naming_the_url_and_the_ports(
    api: Api, services: Services,
) -> None:
    """#22: the functions' security group lets only the deployment's target ports out (template TargetPorts)."""
    use_settings(services, allow_private_targets=False, target_ports=(80, 443))
    reply = api.call("POST", "/jobs", job_body(request={"url": "https://example.com:8443/hook"}))
    assert_error(reply, 400, "invalid_request", "request.url")
    assert reply.body["error"]["message"] == "url port 8443 cannot be reached: this deployment sends to ports 80, 443 only"
    notify = api.call("POST", "/jobs", job_body(notify={"url": "http://example.com:8080/events"}))
    assert_error(notify, 400, "invalid_request", "notify.url")
    job = api.call("POST", "/jobs", job_body(request={"url": "https://example.com/hook"}))
    assert job.status == 201, job.body
    patched = api.call("PATCH", f"/jobs/{job.body['id']}", {"request": {"url": "http://example.com:8080/"}})
    assert_error(patched, 400, "invalid_request", "request.url")
