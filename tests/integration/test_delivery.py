"""HTTP delivery against a real loopback server: pinning the checked address, classifying failures."""
from __future__ import annotations

from tests.conftest import Target
from tickwork.delivery import send
from tickwork.executor import http_client


def test_a_pinned_address_is_used_while_host_stays_the_urls(target: Target) -> None:
    port = target.url.rsplit(":", 1)[1]
    request = {"method": "POST", "url": f"http://hooks.example.invalid:{port}/in?x=1", "body": "{}"}
    outcome = send(http_client(), request, {"Tickwork-Run-Id": "r1"}, timeout=5, pinned_address="127.0.0.1")
    assert outcome.succeeded
    (seen,) = target.requests
    assert seen["path"] == "/in?x=1"
    assert seen["headers"]["Host"] == f"hooks.example.invalid:{port}"
    assert seen["headers"]["Tickwork-Run-Id"] == "r1"


def test_an_unpinned_request_returns_status_and_body(target: Target) -> None:
    outcome = send(http_client(), {"url": target.url + "/"}, {}, timeout=5)
    assert outcome.status_code == 200 and outcome.body == "ok" and outcome.error is None


def test_refused_connection_is_retryable_and_says_so_without_the_url() -> None:
    outcome = send(http_client(), {"url": "http://127.0.0.1:9/x?token=SECRET"}, {}, timeout=2)
    assert outcome.status_code is None and outcome.retryable
    assert outcome.error == "connection failed: could not connect"


def test_server_errors_are_retryable_and_client_errors_are_not(target: Target) -> None:
    target.statuses = [503, 404]
    first = send(http_client(), {"url": target.url + "/"}, {}, timeout=5)
    second = send(http_client(), {"url": target.url + "/"}, {}, timeout=5)
    assert (first.error, first.retryable) == ("HTTP 503", True)
    assert (second.error, second.retryable) == ("HTTP 404", False)
