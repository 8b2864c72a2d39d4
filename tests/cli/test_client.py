"""The CLI's HTTP client against a scripted local server: error shapes, a rate limit waited out, no server."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import pytest

from tickwork_cli.client import Client
from tickwork_cli.errors import ApiError, CliError


class Scripted:
    """Answers each request with the next (status, headers, body) of `answers`, and records what came."""

    def __init__(self) -> None:
        self.answers: list[tuple[int, dict[str, str], bytes]] = []
        self.requests: list[tuple[str, str, bytes]] = []
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                scripted.requests.append((self.command, self.path, self.rfile.read(length)))
                status, headers, body = scripted.answers.pop(0)
                self.send_response(status)
                for name, value in {**headers, "content-length": str(len(body))}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_PUT = do_POST = do_DELETE = _serve

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def server() -> Iterator[Scripted]:
    scripted = Scripted()
    yield scripted
    scripted.server.shutdown()
    scripted.server.server_close()


def test_a_rate_limited_put_is_sent_again_after_retry_after(server: Scripted) -> None:
    limited = json.dumps({"error": {"code": "rate_limited", "message": "too many requests", "field": None}}).encode()
    server.answers = [(429, {"Retry-After": "0"}, limited), (200, {}, b'{"id": "j1"}')]

    answer = Client(server.url, "tw_key").request("PUT", "/jobs/by-key/a%2Fb", {"name": "x"})

    assert answer == {"id": "j1"}
    assert [(m, p, json.loads(b)) for m, p, b in server.requests] == [("PUT", "/jobs/by-key/a%2Fb", {"name": "x"})] * 2


def test_an_api_error_keeps_its_status_code_and_field(server: Scripted) -> None:
    body = {"error": {"code": "invalid_request", "message": "unknown field", "field": "request.follow_redirects"}}
    server.answers = [(400, {}, json.dumps(body).encode())]

    with pytest.raises(ApiError) as refused:
        Client(server.url, "tw_key").request("POST", "/jobs/by-key/a/plan", {})

    error = refused.value
    assert (error.status, error.code, error.field, error.api_message) == (
        400, "invalid_request", "request.follow_redirects", "unknown field")
    assert error.message == "request.follow_redirects: unknown field (400 invalid_request)"


def test_the_gateways_own_answer_is_an_error_too(server: Scripted) -> None:
    server.answers = [(403, {}, b'{"message":"Forbidden"}')]

    with pytest.raises(ApiError, match=r"^Forbidden \(403 gateway\)$"):
        Client(server.url, "tw_key").get("/jobs")


def test_lists_are_read_page_by_page_up_to_the_limit(server: Scripted) -> None:
    server.answers = [(200, {}, b'{"items": [{"id": 1}, {"id": 2}], "next_cursor": "c1"}'),
                      (200, {}, b'{"items": [{"id": 3}], "next_cursor": null}')]

    items = list(Client(server.url, "tw_key").pages("/jobs", {"source": "a b", "tag": ["x", "y"]}))

    assert [item["id"] for item in items] == [1, 2, 3]
    assert [path for _, path, _ in server.requests] == [
        "/jobs?source=a+b&tag=x&tag=y&limit=200", "/jobs?source=a+b&tag=x&tag=y&limit=200&cursor=c1"]


def test_no_server_is_an_error_naming_the_url(server: Scripted) -> None:
    url = server.url
    server.server.shutdown()
    server.server.server_close()

    with pytest.raises(CliError, match=f"cannot reach the API at {url}"):
        Client(url, "tw_key").get("/jobs")
