"""A completion callback carries no API key, so anyone may send one: its token, and then its body's size, are
checked before the body is read. Through the local API Gateway (real sockets) in front of the API function;
`parses` counts the bodies the API parses as JSON."""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.integration.api.test_api_completion import awaiting_run
from tests.integration.api_client import Api
from tickwork.api import body
from tickwork.api.callbacks import MAX_BODY_BYTES
from tickwork.rules import completion
from tickwork_local.server import ApiServer

SIX_MB = 6 * 1024 * 1024
# Each would be read as a 400 (bad JSON, not UTF-8) or a report if it were read at all.
BIG_BODIES = {
    "json": json.dumps({"status": "succeeded", "output": "x" * SIX_MB}).encode(),
    "not_json": b"{" * SIX_MB,
    "not_utf8": b"\xff" * SIX_MB,
}
REPORT = b'{"status": "succeeded"}'


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of every body the API parses as JSON, in order."""
    seen: list[int] = []
    real = body.parse_json

    def counting(text: str) -> Any:
        seen.append(len(text))
        return real(text)

    monkeypatch.setattr(body, "parse_json", counting)
    return seen


def post(server: ApiServer, path: str, data: bytes) -> tuple[int, Any]:
    request = urllib.request.Request(server.url + path, data=data, method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def status_of(api: Api, run_id: str) -> str:
    return str(api.call("GET", f"/executions/{run_id}").body["status"])


@pytest.mark.parametrize("big", BIG_BODIES.values(), ids=BIG_BODIES.keys())
@pytest.mark.parametrize("wrong", ["token", "attempt", "run"])
def test_a_wrong_callback_with_6_mb_is_a_404_and_its_body_is_never_parsed(
        api: Api, db: Any, api_server: ApiServer, parses: list[int], big: bytes, wrong: str) -> None:
    run_id, token = awaiting_run(api, db)
    other_run, _ = awaiting_run(api, db)
    parses.clear()  # the jobs' own bodies
    path = {"token": f"/callbacks/{run_id}/1/{completion.new_token()}", "attempt": f"/callbacks/{run_id}/2/{token}",
            "run": f"/callbacks/{other_run}/1/{token}"}[wrong]
    status, answer = post(api_server, path, big)
    assert (status, answer["error"]["code"]) == (404, "not_found"), answer
    assert parses == [] and status_of(api, run_id) == status_of(api, other_run) == "awaiting_completion"

    status, answer = post(api_server, f"/callbacks/{run_id}/1/{token}", REPORT)  # the count counts
    assert (status, answer["status"], parses) == (200, "succeeded", [len(REPORT)])


def test_a_body_over_64_kib_with_the_right_token_is_a_413_naming_the_limit_and_is_never_parsed(
        api: Api, db: Any, api_server: ApiServer, parses: list[int]) -> None:
    run_id, token = awaiting_run(api, db)
    parses.clear()
    url = f"/callbacks/{run_id}/1/{token}"
    at_limit = REPORT[:-1] + b" " * (MAX_BODY_BYTES - len(REPORT)) + b"}"
    for big in (at_limit + b" ", BIG_BODIES["json"]):
        status, answer = post(api_server, url, big)
        assert (status, answer["error"]) == (413, {
            "code": "payload_too_large", "field": "body",
            "message": f"the body is over {MAX_BODY_BYTES} bytes, the most this route takes"})
    assert parses == [] and status_of(api, run_id) == "awaiting_completion"

    status, answer = post(api_server, url, at_limit)
    assert (status, answer["status"], parses) == (200, "succeeded", [MAX_BODY_BYTES])


@pytest.mark.parametrize("size", [MAX_BODY_BYTES - 1, MAX_BODY_BYTES, MAX_BODY_BYTES + 1, MAX_BODY_BYTES + 2])
def test_a_body_api_gateway_base64_encodes_is_measured_as_sent(
        api: Api, db: Any, api_server: ApiServer, parses: list[int], size: int) -> None:
    """Bytes that are not UTF-8 reach the function base64-encoded (1 or 2 padding characters here)."""
    run_id, token = awaiting_run(api, db)
    parses.clear()
    status, answer = post(api_server, f"/callbacks/{run_id}/1/{token}", b"\xff" * size)
    if size > MAX_BODY_BYTES:
        assert (status, answer["error"]["code"]) == (413, "payload_too_large")
    else:
        assert (status, answer["error"]["message"]) == (400, "request body is not UTF-8")
    assert parses == [] and status_of(api, run_id) == "awaiting_completion"
