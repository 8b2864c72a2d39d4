"""HTTP delivery against a real loopback server: pinning the checked address, classifying failures."""
from __future__ import annotations

import socket
import ssl
import threading
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest
from urllib3.connection import HTTPConnection

from tests.conftest import Target
from tests.integration.helpers import BIG_BODY, UnreadTarget
from tests.support import send, wait_for
from tickwork.http.delivery import MAX_STORED_BODY_BYTES, Connections, TargetKey, prepare
from tickwork.http.signing import Signing
from tickwork.runs.executor import http_client


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


def test_a_second_attempt_reuses_the_keep_alive_connection(target: Target) -> None:
    connections = Connections()
    first = send(connections, {"url": target.url + "/a"}, {}, timeout=5)
    second = send(connections, {"url": target.url + "/b"}, {}, timeout=5)
    assert first.succeeded and second.succeeded
    assert [r["path"] for r in target.requests] == ["/a", "/b"]
    assert target.connections == 1


def test_an_idle_connection_the_target_closed_is_replaced(target: Target) -> None:
    connections = Connections()
    assert send(connections, {"url": target.url + "/a"}, {}, timeout=5).succeeded
    target.drop_connections()  # the target ends the idle connection
    assert send(connections, {"url": target.url + "/b"}, {}, timeout=5).succeeded
    assert target.connections == 2


def test_a_connection_dropped_between_getting_ready_and_the_instant_is_replaced_at_the_instant(
    target: Target,
) -> None:
    connections = Connections()
    assert send(connections, {"url": target.url + "/a"}, {}, timeout=5).succeeded
    prepared = prepare(connections, {"url": target.url + "/b"}, {}, timeout=5)
    assert prepared.reused
    target.drop_connections()  # dropped while the run waits for its instant
    prepared.fire()
    outcome = prepared.complete()
    assert outcome.succeeded, outcome
    assert [r["path"] for r in target.requests] == ["/a", "/b"]
    assert target.connections == 2


def test_getting_ready_opens_the_connection_and_firing_only_writes(target: Target) -> None:
    prepared = prepare(Connections(), {"method": "PUT", "url": target.url + "/x", "body": "hi"}, {}, timeout=5)
    assert wait_for(lambda: target.connections == 1)  # the server counts it once it has accepted it
    assert target.requests == []
    prepared.fire()
    outcome = prepared.complete()
    assert outcome.status_code == 200 and outcome.duration_ms >= 0
    assert [(r["method"], r["body"]) for r in target.requests] == [("PUT", "hi")]


class _CountingSocket:
    """The connection's socket, noting each write."""

    def __init__(self, sock: Any) -> None:
        self._sock = sock
        self.writes: list[bytes] = []

    def send(self, data: bytes) -> int:
        sent = self._sock.send(data)
        self.writes.append(bytes(data[:sent]))
        return sent

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


def test_firing_writes_the_head_and_the_body_in_one_send(target: Target) -> None:
    """One system call at the instant, and a small request reaches the target in one segment."""
    prepared = prepare(Connections(), {"method": "POST", "url": target.url + "/x", "body": '{"a":1}'}, {}, timeout=5)
    assert prepared.conn is not None
    counting = _CountingSocket(prepared.conn.sock)
    prepared.conn.sock = counting  # type: ignore[assignment]
    prepared.fire()
    assert len(counting.writes) == 1
    head, _, body = counting.writes[0].partition(b"\r\n\r\n")
    assert head.startswith(b"POST /x HTTP/1.1\r\n") and b"\r\ncontent-length: 7" in head.lower()
    assert body == b'{"a":1}'
    assert prepared.complete().status_code == 200
    assert [(r["method"], r["body"]) for r in target.requests] == [("POST", '{"a":1}')]


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_firing_leaves_what_a_target_does_not_read_at_once_for_complete_to_write(
    scheme: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The group's writer fires: it must not wait for a target that stops reading. The target reads only
    once fire() has returned, so a fire() that waited for it would fail the attempt unsent. (Over TLS
    OpenSSL counts nothing written until the whole request is: it is handed the same bytes again.)"""
    tls = None
    if scheme == "https":
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(*_self_signed(tmp_path, "localhost"))
        monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "cert.pem"))  # trust the test certificate
    unread = UnreadTarget(tls)
    try:
        url = unread.url.replace("127.0.0.1", "localhost") + "/big"
        prepared = prepare(Connections(), {"method": "POST", "url": url, "body": BIG_BODY}, {}, timeout=3,
                           pinned_address="127.0.0.1")
        assert prepared.error is None
        prepared.fire()
        assert prepared.awaiting() == (None, 0.0)  # nothing to wait for before the rest is written
        assert getattr(prepared.conn, "written") < len(BIG_BODY.encode())
        unread.reading.set()
        outcome = prepared.complete()
    finally:
        unread.close()
    assert (outcome.status_code, outcome.body, outcome.error) == (200, "ok", None)
    assert unread.requests_read == 1


def test_firing_opens_no_connection_a_run_left_for_its_instant() -> None:
    """Opening a connection waits on the target (a round trip, or the whole timeout while it drops
    connection attempts): complete() opens it and writes, not the group's writer."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.setblocking(False)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/x"
        prepared = prepare(Connections(connect_ahead=False), {"url": url}, {}, timeout=5)
        prepared.fire()
        with pytest.raises(BlockingIOError):
            listener.accept()  # no connection was attempted
        answering = threading.Thread(target=_answer_one, args=(listener,))
        answering.start()
        outcome = prepared.complete()
        answering.join(5)
    assert (outcome.status_code, outcome.error) == (200, None)


def _answer_one(listener: socket.socket) -> None:
    """Accept one connection, read a request's head and answer 200 with no body."""
    listener.setblocking(True)
    conn, _ = listener.accept()
    with conn:
        head = b""
        while b"\r\n\r\n" not in head:
            head += conn.recv(4096)
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")


def test_a_target_that_cannot_be_reached_fails_when_getting_ready_and_fires_nothing() -> None:
    prepared = prepare(Connections(), {"url": "http://127.0.0.1:9/x?token=SECRET"}, {}, timeout=2)
    assert prepared.error == "connection failed: could not connect"
    prepared.fire()
    assert prepared.complete().error == "connection failed: could not connect"


def test_a_whole_response_leaves_its_connection_idle_for_the_next_attempt(target: Target) -> None:
    connections = Connections()
    assert send(connections, {"url": target.url + "/"}, {}, timeout=5).body == "ok"
    assert connections.idle_count(_key(target)) == 1


def test_a_long_response_body_is_cut_and_its_connection_dropped(target: Target) -> None:
    target.response_body = b"x" * (MAX_STORED_BODY_BYTES + 10)
    connections = Connections()
    outcome = send(connections, {"url": target.url + "/"}, {}, timeout=5)
    assert outcome.succeeded and outcome.body == "x" * MAX_STORED_BODY_BYTES
    assert connections.idle_count(_key(target)) == 0


def _key(target: Target) -> TargetKey:
    return ("http", "127.0.0.1", int(target.url.rsplit(":", 1)[1]), None)


def test_retry_after_in_seconds_is_read_from_the_response(target: Target) -> None:
    target.statuses = [503]
    target.response_headers = {"Retry-After": "7"}
    outcome = send(Connections(), {"url": target.url + "/"}, {}, timeout=5)
    assert (outcome.status_code, outcome.retry_after_seconds, outcome.retryable) == (503, 7.0, True)


def test_a_header_that_would_corrupt_the_request_is_refused_and_nothing_is_sent(target: Target) -> None:
    request = {"url": target.url + "/", "headers": {"X-Bad": "a\r\nInjected: yes"}}
    outcome = send(Connections(), request, {}, timeout=5)
    assert outcome.error == "refused: invalid request header" and not outcome.retryable
    assert target.requests == []


def test_framing_headers_are_the_requests_own(target: Target) -> None:
    request = {"method": "POST", "url": target.url + "/p",
               "headers": {"content-length": "999", "Host": "evil.example", "X-Keep": "1"}}
    assert send(Connections(), request, {}, timeout=5).succeeded
    assert send(Connections(), {"method": "GET", "url": target.url + "/g"}, {}, timeout=5).succeeded
    post, get = target.requests
    assert post["headers"]["Content-Length"] == "0" and post["headers"]["X-Keep"] == "1"
    assert post["headers"]["Host"] == target.url.removeprefix("http://")
    assert "Content-Length" not in get["headers"] and get["headers"]["User-Agent"] == "Tickwork/0.1"


def test_an_https_target_whose_certificate_is_not_trusted_is_refused_before_anything_is_sent(
    tmp_path: Path,
) -> None:
    """The connection (and its TLS handshake) is made while the run waits for its instant; a certificate
    the default trust store does not know is refused there, with a text that names no URL, and not
    retried: trying again a second later meets the same certificate."""
    with _https_server(tmp_path, "localhost") as (port, seen):
        prepared = prepare(Connections(), {"url": f"https://localhost:{port}/x?token=SECRET"}, {}, timeout=5,
                           pinned_address="127.0.0.1")
        assert prepared.error == "refused: the target's TLS certificate is self-signed"
        prepared.fire()
        outcome = prepared.complete()
    assert outcome.error == "refused: the target's TLS certificate is self-signed" and not outcome.retryable
    assert seen == []


def test_a_pinned_https_request_checks_the_urls_host_name_while_connecting_to_the_checked_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    with _https_server(tmp_path, "hooks.example.test") as (port, seen):
        monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "cert.pem"))  # trust the test certificate
        url = f"https://hooks.example.test:{port}/in"
        assert send(Connections(), {"url": url}, {}, timeout=5, pinned_address="127.0.0.1").status_code == 200
        assert seen == [("/in", f"hooks.example.test:{port}")]
        # The same certificate does not name 127.0.0.1: asked for by address, the check refuses it.
        wrong = send(Connections(), {"url": f"https://127.0.0.1:{port}/in"}, {}, timeout=5)
        assert wrong.error == "refused: the target's TLS certificate is issued for another IP address"


@contextmanager
def _https_server(directory: Path, host: str) -> Iterator[tuple[int, list[tuple[str, str]]]]:
    """An HTTPS server on loopback with a self-signed certificate for `host`; yields its port and the
    (path, Host header) of each request it answered."""
    cert, key = _self_signed(directory, host)
    seen: list[tuple[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append((self.path, self.headers["Host"]))
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1], seen
    finally:
        server.shutdown()
        server.server_close()


def _self_signed(directory: Path, host: str) -> tuple[str, str]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.now(timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - timedelta(days=1))
            .not_valid_after(now + timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_path), str(key_path)


def test_idle_connections_are_capped_in_all_closing_the_least_recently_used_targets_first() -> None:
    connections = Connections(max_idle_per_target=3, max_idle=4)
    a, b = ("http", "a.example", 80, None), ("http", "b.example", 80, None)
    given = {key: [HTTPConnection(key[1], 80) for _ in range(4)] for key in (a, b)}
    for conn in given[a]:
        connections.give_back(a, conn)  # the fourth is over a's own cap
    assert connections.idle_count(a) == 3
    connections.give_back(b, given[b][0])
    connections.give_back(b, given[b][1])  # five in all: a, the least recently used, gives up its oldest
    assert (connections.idle_count(a), connections.idle_count(b), connections.idle_count()) == (2, 2, 4)
    # None of them was ever connected: taking one for b discards both of b's and opens a new one.
    conn, reused = connections.take(b)
    assert not reused and conn not in given[b]
    assert (connections.idle_count(b), connections.idle_count()) == (0, 2)


def test_what_is_redacted_is_judged_once_per_request_and_not_from_tickworks_own_signature(target: Target) -> None:
    """The job's sensitive values (and interpolated secrets) are redacted from the answer; the Standard
    Webhooks signature Tickwork adds is computed from a key never sent, so it is not spelled out."""
    target.response_body = b"got Bearer tok-123456 and secret-xyz"
    request = {"method": "POST", "url": target.url + "/in?token=q-98765", "body": "{}",
               "headers": {"Authorization": "Bearer tok-123456", "X-Trace": "trace"}}
    prepared = prepare(http_client(), request, {}, 5, signing=Signing("run-1", 1_900_000_000, (b"k" * 32,)),
                       secrets=("secret-xyz",))
    signature = prepared.headers["webhook-signature"]
    assert {"tok-123456", "Bearer tok-123456", "q-98765", "secret-xyz"} <= set(prepared.secrets)
    assert not any(signature in s or s in signature for s in prepared.secrets)
    prepared.fire()
    outcome = prepared.complete()
    assert outcome.body == "got *** and ***"
    (seen,) = target.requests
    assert seen["headers"]["webhook-signature"] == signature
