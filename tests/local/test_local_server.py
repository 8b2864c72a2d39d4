"""The local API Gateway over real sockets: every method reaches the API, every answer is JSON."""
from __future__ import annotations

import http.client
import json
import socket
from http import HTTPStatus

import pytest

from tests.integration.api_client import EVENT_TOKEN
from tickwork_local.server import ApiServer


def request(api_server: ApiServer, method: str, path: str) -> http.client.HTTPResponse:
    host, port = api_server.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request(method, path, headers={"Authorization": f"Bearer {EVENT_TOKEN}"})
    return conn.getresponse()


@pytest.mark.parametrize(("method", "path", "allowed"), [
    ("TRACE", "/jobs", "GET, POST"),
    ("CONNECT", "/schedules/preview", "POST"),
    ("BREW", "/jobs", "GET, POST"),
])
def test_an_unknown_method_is_the_apis_json_405(api_server: ApiServer, method: str, path: str, allowed: str) -> None:
    response = request(api_server, method, path)
    assert response.status == 405
    assert response.getheader("Content-Type") == "application/json"
    assert response.getheader("Allow") == allowed
    assert json.loads(response.read())["error"]["code"] == "method_not_allowed"


def test_an_unknown_method_on_an_unknown_path_is_the_apis_json_404(api_server: ApiServer) -> None:
    response = request(api_server, "TRACE", "/nowhere")
    assert response.status == 404
    assert json.loads(response.read())["error"]["code"] == "not_found"


@pytest.mark.parametrize(("raw", "status"), [
    (b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n", 414),
    (b"GET /jobs HTTP/1.1\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(120)) + b"\r\n", 431),
    (b"GET /jobs HTTP/1.1\r\nX-Long: " + b"a" * 70_000 + b"\r\n\r\n", 431),
])
def test_a_request_the_server_cannot_read_is_answered_in_json(api_server: ApiServer, raw: bytes, status: int) -> None:
    host, port = api_server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(raw)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 %d " % status), head
    assert b"content-type: application/json" in head.lower(), head
    assert json.loads(body) == {"message": HTTPStatus(status).phrase}
