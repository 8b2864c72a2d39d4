"""Delivery against servers that close connections: judged by the answer, never re-sent by mistake.

Each server here is a loopback socket following a script (what it reads, what it writes and how it ends
the connection), so a case stands for what stock servers do (tests/interop runs the servers themselves):
HTTP/1.0 and `Connection: close` answers whose body follows the head in a separate segment, a reset after
a whole answer, header and keep-alive timeouts shorter than the wait before a run's instant.
"""
from __future__ import annotations

import socket
import struct
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from tests.support import send, wait_for
from tickwork.http.connections import Connections, closed_by_peer
from tickwork.http.delivery import prepare

Script = Callable[[socket.socket], None]


class ScriptedServer:
    """Accepts connections on loopback and runs `script(conn)` for each, on a thread of its own; counts
    connections and keeps every request it read (`read_request`)."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[bytes] = []
        self.connections = 0
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            self.script(conn)
        except OSError:
            pass
        finally:
            conn.close()

    def read_request(self, conn: socket.socket, timeout: float = 5.0) -> bytes | None:
        """One request (head and Content-Length body) off `conn`; None if it closed or stayed silent."""
        conn.settimeout(timeout)
        data = b""
        try:
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return None
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            while len(body) < length:
                body += conn.recv(65536)
        except (TimeoutError, OSError):
            return None
        with self._lock:
            self.requests.append(head)
        return head

    def close(self) -> None:
        self._closed = True
        self._listener.close()


@pytest.fixture
def serve() -> Iterator[Callable[[Script], ScriptedServer]]:
    started: list[ScriptedServer] = []

    def start(script: Script) -> ScriptedServer:
        started.append(ScriptedServer(script))
        return started[-1]

    yield start
    for server in started:
        server.close()


def reset(conn: socket.socket) -> None:
    """Close with SO_LINGER 0: the kernel sends a reset instead of a FIN."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


POST = {"method": "POST", "url": "", "body": '{"n":1}'}


def _post(server: ScriptedServer, path: str = "/hook") -> dict[str, Any]:
    return {**POST, "url": server.url + path}


# ---------------------------------------------------------------- judged by the answer


def test_an_http_1_0_answer_whose_body_follows_its_head_is_read_whole(serve: Callable[[Script], ScriptedServer]) -> None:
    """Break: Python's http.server on HTTP/1.0 writes the head, then the body in a second segment, then
    closes. http.client closes the connection once it has the head; the body was then read from a
    closed socket ('connection failed: OSError'), and the answered run was sent again.
    Must hold: the answer is the outcome."""
    def script(conn: socket.socket) -> None:
        server.read_request(conn)
        conn.sendall(b"HTTP/1.0 200 OK\r\nServer: BaseHTTP/0.6\r\n\r\n")
        time.sleep(0.05)
        conn.sendall(b"done")

    server = serve(script)
    for _ in range(3):
        outcome = send(Connections(), _post(server), {}, timeout=5)
        assert (outcome.status_code, outcome.body, outcome.error) == (200, "done", None)
    assert len(server.requests) == 3


def test_a_connection_close_answer_with_a_length_is_read_whole_and_not_kept(
    serve: Callable[[Script], ScriptedServer],
) -> None:
    """Break: gunicorn's sync worker answers with `Connection: close` and a Content-Length body sent after
    its head. Must hold: the answer is the outcome, and the connection is not kept for the next run."""
    def script(conn: socket.socket) -> None:
        server.read_request(conn)
        conn.sendall(b"HTTP/1.1 201 Created\r\nConnection: close\r\nContent-Length: 5\r\n\r\n")
        time.sleep(0.05)
        conn.sendall(b"hello")

    server = serve(script)
    connections = Connections()
    outcome = send(connections, _post(server), {}, timeout=5)
    assert (outcome.status_code, outcome.body, outcome.error) == (201, "hello", None)
    assert connections.idle_count() == 0


@pytest.mark.parametrize("framing", ["length", "chunked", "close"])
def test_a_reset_right_after_a_whole_answer_is_still_that_answer(
    serve: Callable[[Script], ScriptedServer], framing: str,
) -> None:
    """Break: the server writes a whole answer and resets the connection (it closed with the request's
    bytes unread, or with SO_LINGER 0). Must hold: the answer read before the reset is the outcome."""
    heads = {"length": b"Content-Length: 2\r\n\r\nok", "chunked": b"Transfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
             "close": b"\r\nok"}

    def script(conn: socket.socket) -> None:
        server.read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\n" + heads[framing])
        time.sleep(0.05)
        reset(conn)

    server = serve(script)
    prepared = prepare(Connections(), _post(server), {}, timeout=5)
    prepared.fire()
    time.sleep(0.2)  # the reset is there before a byte of the answer is read
    outcome = prepared.complete()
    assert (outcome.status_code, outcome.body, outcome.error) == (200, "ok", None)


def test_no_answer_after_the_request_was_written_says_the_target_may_have_acted_on_it(
    serve: Callable[[Script], ScriptedServer],
) -> None:
    """Break: the server reads the request and closes without answering. Must hold: a retryable failure
    that says the request was written (the job's backoff retries it; the run id lets the target dedupe)."""
    def script(conn: socket.socket) -> None:
        server.read_request(conn)

    server = serve(script)
    outcome = send(Connections(), _post(server), {}, timeout=5)
    assert outcome.error == ("connection failed: closed after the request was written, before any response"
                             " (the target may have acted on it)")
    assert outcome.retryable and outcome.status_code is None and len(server.requests) == 1


def test_an_answer_cut_short_is_a_failure_that_names_its_status(serve: Callable[[Script], ScriptedServer]) -> None:
    def script(conn: socket.socket) -> None:
        server.read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part")

    server = serve(script)
    outcome = send(Connections(), _post(server), {}, timeout=5)
    assert outcome.error == "connection failed: the response (HTTP 200) was cut off (the target may have acted on it)"
    assert outcome.retryable and outcome.status_code is None


# ---------------------------------------------------------------- connections that wait


def _idle_timeout_server(serve: Callable[[Script], ScriptedServer], idle: float) -> ScriptedServer:
    """Keep-alive, but a connection that brings no request within `idle` seconds is closed: a fresh one
    (a header timeout) and a kept one (a keep-alive timeout) alike, as http.server with `timeout = 1`."""
    def script(conn: socket.socket) -> None:
        while server.read_request(conn, timeout=idle) is not None:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    server = serve(script)
    return server


def test_a_connection_opened_ahead_that_the_target_closed_is_replaced_and_the_request_goes_once(
    serve: Callable[[Script], ScriptedServer],
) -> None:
    """Break: the connection is opened while the run waits for its instant; the target's header timeout
    (0.3 s here) closes it before the write. Before, the request was written into the closed connection
    and the run failed. Must hold: it goes out once, on a new connection, and succeeds; the target is
    remembered as closing connections that wait, so the next run's connection is opened later."""
    server = _idle_timeout_server(serve, idle=0.3)
    connections = Connections()
    prepared = prepare(connections, _post(server), {}, timeout=5)
    assert prepared.conn is not None and prepared.conn.sock is not None  # opened ahead
    time.sleep(0.6)
    prepared.fire()
    outcome = prepared.complete()
    assert (outcome.status_code, outcome.error) == (200, None)
    assert len(server.requests) == 1 and server.connections == 2
    wait = connections.safe_wait(prepared.key)
    assert wait is not None and 0.3 <= 2 * wait < 1.0  # half the 0.6 s it was seen closing after
    assert connections.lead(prepared.key) == pytest.approx(wait)


def test_a_target_that_closes_waiting_connections_gets_them_opened_within_its_limit(
    serve: Callable[[Script], ScriptedServer],
) -> None:
    """After the target was seen closing a connection that waited 0.6 s, a connection to it waits at most
    0.3 s: a run is made ready without one, which is opened 0.3 s before the instant, and a kept
    connection that would have waited longer by then is not taken."""
    server = _idle_timeout_server(serve, idle=1.0)
    connections = Connections()
    key = ("http", "127.0.0.1", server.port, None)
    connections.closed_early(key, 0.6)
    prepared = prepare(connections, _post(server), {}, timeout=5)
    assert prepared.conn is None and prepared.lead == pytest.approx(0.3)
    time.sleep(0.5)
    prepared.connect(within=0.1)
    prepared.fire()
    assert prepared.complete().status_code == 200
    assert connections.idle_count(key) == 1  # kept, answered just now

    time.sleep(0.1)
    again = prepare(connections, _post(server), {}, timeout=5)
    again.connect(within=0.1)
    assert again.reused  # 0.1 + 0.1 < 0.3
    again.fire()
    assert again.complete().status_code == 200
    time.sleep(0.2)
    late = prepare(connections, _post(server), {}, timeout=5)
    late.connect(within=0.15)  # 0.2 + 0.15 > 0.3: it would have waited too long
    assert not late.reused
    late.fire()
    assert late.complete().status_code == 200
    assert len(server.requests) == 3


def test_a_write_into_a_connection_reset_under_it_goes_out_once_on_a_new_one(
    serve: Callable[[Script], ScriptedServer],
) -> None:
    """Break: the target resets the waiting connection just before the write (so the write itself fails,
    nothing sent). Must hold: the request is written once, on a new connection; the run succeeds."""
    first = threading.Event()

    def script(conn: socket.socket) -> None:
        if not first.is_set():
            first.set()
            time.sleep(0.2)
            reset(conn)
            return
        server.read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    server = serve(script)
    prepared = prepare(Connections(), _post(server), {}, timeout=5)
    time.sleep(0.4)
    assert prepared.conn is not None and prepared.conn.sock is not None
    prepared.fire()
    assert prepared.complete().status_code == 200
    assert len(server.requests) == 1 and server.connections == 2


def test_a_kept_connection_closed_as_the_request_arrived_is_replaced_and_the_request_goes_once(
    serve: Callable[[Script], ScriptedServer],
) -> None:
    """Break: the target's keep-alive timeout fires just as the next request arrives (an interval equal
    to the timeout): the connection was open when checked, the request was written, and the target
    closed it without reading the request, so its kernel reset it. Before, that was a failed attempt,
    retried with the job's backoff. Must hold: nothing was acted on, so the request goes out once more at
    once on a new connection, in the same attempt, and the target is remembered as closing kept ones."""
    def script(conn: socket.socket) -> None:
        server.read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        conn.settimeout(5)
        if conn.recv(1, socket.MSG_PEEK) and server.connections == 1:
            conn.close()  # the next request is there, unread: the kernel resets the connection

    server = serve(script)
    connections = Connections()
    assert send(connections, _post(server, "/first"), {}, timeout=5).status_code == 200
    prepared = prepare(connections, _post(server, "/second"), {}, timeout=5)
    assert prepared.reused
    prepared.fire()
    outcome = prepared.complete()
    assert (outcome.status_code, outcome.error) == (200, None)
    assert [r.split(b" ")[1] for r in server.requests] == [b"/first", b"/second"]
    assert server.connections == 2 and connections.safe_wait(prepared.key) is not None


def test_connecting_ahead_can_be_turned_off(serve: Callable[[Script], ScriptedServer]) -> None:
    server = _idle_timeout_server(serve, idle=5)
    connections = Connections(connect_ahead=False)
    prepared = prepare(connections, _post(server), {}, timeout=5)
    assert prepared.conn is None and prepared.lead == 0.0
    time.sleep(0.1)
    assert server.connections == 0
    prepared.fire()
    assert prepared.complete().status_code == 200 and server.connections == 1


def test_an_open_connection_with_nothing_to_read_is_not_taken_for_closed(serve: Callable[[Script], ScriptedServer]) -> None:
    server = _idle_timeout_server(serve, idle=5)
    with socket.create_connection(("127.0.0.1", server.port)) as client:
        assert not closed_by_peer(client)
        assert client.gettimeout() is None  # its blocking mode is left as it was
    closing = serve(lambda conn: None)
    with socket.create_connection(("127.0.0.1", closing.port)) as client:
        assert wait_for(lambda: closed_by_peer(client), timeout=5)


# ---------------------------------------------------------------- TLS


def test_a_private_ca_named_by_the_deployment_is_trusted_and_session_tickets_do_not_close_a_connection(
    tmp_path: Path,
) -> None:
    """A target with a certificate from a private CA is refused by default and delivered once the
    deployment names the CA (TICKWORK_TARGET_CA_BUNDLE). A TLS 1.3 server sends session tickets after the
    handshake: a connection opened ahead is readable, yet good, and carries the request."""
    ca, cert, key = _private_ca(tmp_path)
    with _tls_server(cert, key) as (port, requests, accepted):
        url = f"https://localhost:{port}/in"
        refused = send(Connections(), {"url": url}, {}, timeout=5)
        assert refused.error == "refused: the target's TLS certificate is issued by an unknown CA"
        assert not refused.retryable and requests == []

        connections = Connections(ca_bundle=str(ca))
        prepared = prepare(connections, {"url": url}, {}, timeout=5)
        time.sleep(0.3)  # the tickets arrive while the run waits
        prepared.fire()
        outcome = prepared.complete()
        assert (outcome.status_code, outcome.error) == (200, None)
        assert requests == ["/in"] and len(accepted) == 2  # the refused one, then this one: not reopened


def _private_ca(directory: Path) -> tuple[Path, Path, Path]:
    """A CA certificate, and a certificate it issued for localhost with its key."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.now(timezone.utc)
    ca_key, leaf_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Tickwork test CA")])
    # The extensions Python 3.13's strict verification (VERIFY_X509_STRICT) asks of a CA and of a leaf.
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - timedelta(days=1))
          .not_valid_after(now + timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    leaf = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(ca_name).public_key(leaf_key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(days=1)).not_valid_after(now + timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = directory / "ca.pem", directory / "leaf.pem", directory / "leaf.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(leaf_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                serialization.NoEncryption()))
    return paths


class _tls_server:
    """A TLS 1.3 server on loopback for `cert`; yields (port, request paths, accept times)."""

    def __init__(self, cert: Path, key: Path) -> None:
        import ssl

        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_3
        self.context.load_cert_chain(cert, key)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.requests: list[str] = []
        self.accepted: list[float] = []

    def __enter__(self) -> tuple[int, list[str], list[float]]:
        threading.Thread(target=self._accept, daemon=True).start()
        return self.listener.getsockname()[1], self.requests, self.accepted

    def __exit__(self, *exc: Any) -> None:
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted.append(time.time())
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        try:
            with self.context.wrap_socket(raw, server_side=True) as conn:
                conn.settimeout(5)
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                self.requests.append(data.split(b" ", 2)[1].decode())
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                time.sleep(0.2)
        except OSError:  # the refused client ends the handshake
            raw.close()


def test_how_connections_are_made_is_set_by_the_deployment(tmp_path: Path) -> None:
    """TICKWORK_CONNECT_AHEAD and TICKWORK_TARGET_CA_BUNDLE reach the environment's connections; a CA
    bundle that cannot be read fails at the cold start, naming the variable, not at every run."""
    from tickwork.errors import ConfigurationError
    from tickwork.runs.executor import http_client
    from tickwork.settings import Settings

    env = {"DATABASE_URL": "postgresql://h/db", "REDIS_URL": "redis://h:6379/0"}
    defaults = Settings.from_env(env)
    assert (defaults.connect_ahead, defaults.target_ca_bundle) == (True, "")
    bundle = tmp_path / "ca.pem"
    bundle.write_text("")
    tuned = Settings.from_env({**env, "TICKWORK_CONNECT_AHEAD": "false", "TICKWORK_TARGET_CA_BUNDLE": str(bundle)})
    connections = http_client(tuned)
    assert (connections.connect_ahead, connections.ca_bundle) == (False, str(bundle))
    assert http_client(tuned) is connections and http_client(defaults) is not connections
    with pytest.raises(ConfigurationError, match="TICKWORK_TARGET_CA_BUNDLE"):
        Settings.from_env({**env, "TICKWORK_TARGET_CA_BUNDLE": str(tmp_path / "missing.pem")})
