"""tickwork.api.body.BodyGate on a resolver of its own: nothing the route's pattern matches gets past the gate
unchecked, and a body is measured as sent, base64 or not. No I/O."""
from __future__ import annotations

import base64
import json
from typing import Any, Mapping

import pytest

from tickwork.api.body import BodyGate, JsonApiResolver, body_bytes
from tickwork.api.callbacks import GATE, PATH
from tickwork.errors import NotFoundError

LIMIT = 64


class Refusing:
    """A gate's `admit` that refuses everything and remembers what it was asked."""

    def __init__(self) -> None:
        self.asked: list[dict[str, str]] = []

    def __call__(self, parameters: Mapping[str, str]) -> None:
        self.asked.append(dict(parameters))
        raise NotFoundError("no such callback")


def resolver(admit: Any) -> tuple[JsonApiResolver, list[dict[str, Any]]]:
    app, reached = JsonApiResolver(enable_validation=True), []

    @app.post(PATH)
    def report(execution_id: str, attempt: str, token: str) -> dict[str, str]:
        reached.append({"execution_id": execution_id, "attempt": attempt, "token": token})
        return {}

    app.add_gate(BodyGate("POST", PATH, LIMIT, admit))
    return app, reached


def event(path: str, body: str | None = None, base64_encoded: bool = False, method: str = "POST") -> dict[str, Any]:
    return {"version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": "", "headers": {},
            "requestContext": {"http": {"method": method, "path": path}, "stage": "$default"},
            "body": body, "isBase64Encoded": base64_encoded}


@pytest.mark.parametrize("path", [
    "/callbacks/a/1/t", "/callbacks/a/1/t/", "/callbacks/6f1c/one/tok-en_~.()!*:@,;=+&$",
    "/callbacks/a%2Fb/1/t", "/callbacks/a/1/t%20u", "/callbacks/a/1/%7B%7D",
])
def test_every_path_the_route_takes_is_asked_at_the_gate_first(path: str) -> None:
    admit = Refusing()
    app, reached = resolver(admit)
    answer = app.resolve(event(path, "not json at all"), None)
    assert answer["statusCode"] == 404 and json.loads(answer["body"])["error"]["code"] == "not_found"
    assert reached == [] and len(admit.asked) == 1


@pytest.mark.parametrize(("path", "method"), [
    ("/callbacks/a/1", "POST"), ("/callbacks//1/t", "POST"), ("/callbacks/a/1/t/x", "POST"),
    ("/callbacks/a/1/t", "GET"), ("/Callbacks/a/1/t", "POST"),
])
def test_a_path_the_gate_leaves_is_one_the_route_does_not_take(path: str, method: str) -> None:
    admit = Refusing()
    app, reached = resolver(admit)
    answer = app.resolve(event(path, "not json at all", method=method), None)
    assert answer["statusCode"] in (404, 405) and reached == [] and admit.asked == []


def test_an_admitted_request_is_refused_413_past_the_limit_and_served_at_it() -> None:
    app, reached = resolver(lambda parameters: None)
    over = app.resolve(event("/callbacks/r/2/t", "x" * (LIMIT + 1)), None)
    assert over["statusCode"] == 413 and json.loads(over["body"])["error"] == {
        "code": "payload_too_large", "message": f"the body is over {LIMIT} bytes, the most this route takes",
        "field": "body"}
    assert reached == []
    assert app.resolve(event("/callbacks/r/2/t", " " * (LIMIT - 2) + "{}"), None)["statusCode"] == 200
    assert reached == [{"execution_id": "r", "attempt": "2", "token": "t"}]


@pytest.mark.parametrize("size", range(LIMIT - 3, LIMIT + 4))
def test_body_bytes_counts_bytes_as_sent(size: int) -> None:
    raw = ("é" * size).encode()[:size]  # cut mid-character too: not UTF-8, so base64 as API Gateway sends it
    assert body_bytes({"body": base64.b64encode(raw).decode(), "isBase64Encoded": True}, LIMIT) == size
    text = "é" * size
    assert body_bytes({"body": text}, 10 * size) == 2 * size
    assert body_bytes({"body": text}, size - 1) >= size  # past `enough`: at least that, never encoded


def test_the_callback_route_has_its_gate() -> None:
    assert (GATE.method, GATE.path, GATE.max_bytes) == ("POST", PATH, 64 * 1024)
