"""Sends HTTP attempts with urllib3 and describes what happened, without leaking secrets.

An attempt is taken in three steps, so that the instant a run is due costs one socket write:
`prepare` (ahead of the instant: take a warm keep-alive connection or open one, render the request),
`Prepared.fire` (at the instant: write the request) and `Prepared.complete` (read the response,
classify it, hand the connection back). `send` does the three at once.

`timeout` bounds the attempt in all, not each socket operation: connecting, writing the request and
reading the status, headers and body share it, counted from the attempt's start (for the executor the
start Postgres recorded: the instant the run was due or, if later, when it was started), so a target
answering a byte at a time cannot hold an attempt past it, and the sweeper, waiting the same timeout
plus a margin, never retries an attempt still connected. (A TLS handshake, and a write over TLS, wait
per operation for what is left; either way no request starts to be written once the time is up.)

Error texts are built from the failure's kind, never from the exception message: urllib3 puts the full
URL (query strings carry tokens) into its messages, and attempts are stored and shown to users. Values
of the request's secrets that a target echoes are redacted from what is kept of its answer.
"""
from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from datetime import datetime
from email.utils import parsedate_to_datetime
from functools import partial
from typing import Any, Mapping
from urllib.parse import urlsplit

from urllib3 import exceptions as ux
from urllib3.connection import HTTPConnection, HTTPSConnection

from tickwork.deadline import LateError, TimedResponse, time_to_send
from tickwork.redaction import redact, secret_values
from tickwork.retry import is_retryable_status
from tickwork.signing import Signing

# Enough of a response to debug a failing target; history rows stay small.
MAX_STORED_BODY_BYTES = 4096
USER_AGENT = "Tickwork/0.1"
# Long enough for a slow webhook, well short of the executor's own cap (settings.max_request_timeout_seconds).
DEFAULT_TIMEOUT_SECONDS = 30
# Idle keep-alive connections kept per target: an execution environment runs one invocation at a time,
# which sends at most sending.MAX_PARALLEL_SENDS (50) requests at once.
MAX_IDLE_PER_TARGET = 64
# Idle connections kept in all: each is an open file, and Lambda allows an environment 1,024. Beyond this
# the least recently used target's oldest are closed.
MAX_IDLE = 256

# Failures before sending that a retry would only repeat: a refused target, a secret the tenant lacks.
NOT_RETRIED = ("refused:", "unknown secret ")

# (scheme, host, port, pinned address): a connection pinned to a checked address is only reused for it.
TargetKey = tuple[str, str, int, str | None]


@dataclass(frozen=True)
class Outcome:
    status_code: int | None
    body: str | None
    error: str | None
    duration_ms: int
    retry_after_seconds: float | None = None
    accepted: bool | None = None  # the job's success rules' verdict (tickwork.success); None: 2xx is success

    @property
    def succeeded(self) -> bool:
        if self.accepted is not None:
            return self.accepted
        return self.status_code is not None and 200 <= self.status_code < 300

    @property
    def retryable(self) -> bool:
        if self.accepted is False and self.status_code is not None and self.status_code < 400:
            return True  # the target answered, but not as the job expects: may be transient
        if self.status_code is None:
            return self.error is not None and not self.error.startswith(NOT_RETRIED)
        return is_retryable_status(self.status_code)


class Connections:
    """Keep-alive connections per target, reused across the invocations of one execution environment.

    A connection is out (owned by one attempt) or idle here; an idle one the target closed meanwhile is
    noticed when taken (a zero-timeout poll) and discarded.
    """

    def __init__(self, max_idle_per_target: int = MAX_IDLE_PER_TARGET, max_idle: int = MAX_IDLE) -> None:
        self.max_idle_per_target = max_idle_per_target
        self.max_idle = max_idle
        self._idle: OrderedDict[TargetKey, list[HTTPConnection]] = OrderedDict()  # least recently used first
        self._count = 0
        self._lock = threading.Lock()

    def take(self, key: TargetKey) -> tuple[HTTPConnection, bool]:
        """A connection to `key` and whether it is a reused (already open) one."""
        while (conn := self._pop(key)) is not None:
            if conn.is_connected:
                return conn, True
            conn.close()
        return _new_connection(key), False

    def give_back(self, key: TargetKey, conn: HTTPConnection) -> None:
        evicted: list[HTTPConnection] = []
        with self._lock:
            idle = self._idle.setdefault(key, [])
            self._idle.move_to_end(key)
            if len(idle) < self.max_idle_per_target:
                idle.append(conn)
                self._count += 1
            else:
                evicted.append(conn)
            while self._count > self.max_idle:
                oldest_key, oldest = next(iter(self._idle.items()))
                evicted.append(oldest.pop(0))
                self._count -= 1
                if not oldest:
                    del self._idle[oldest_key]
        for old in evicted:
            old.close()

    def idle_count(self, key: TargetKey | None = None) -> int:
        """Idle connections to `key`, or to every target."""
        with self._lock:
            return self._count if key is None else len(self._idle.get(key, ()))

    def close(self) -> None:
        with self._lock:
            idle, self._idle, self._count = self._idle, OrderedDict(), 0
        for conns in idle.values():
            for conn in conns:
                conn.close()

    def _pop(self, key: TargetKey) -> HTTPConnection | None:
        with self._lock:
            idle = self._idle.get(key)
            if not idle:
                return None
            self._count -= 1
            conn = idle.pop()
            if not idle:
                del self._idle[key]
            return conn


class _OneWrite(http.client.HTTPConnection):
    """The request's head and its body leave in one socket send, not two (http.client's own endheaders
    sends the body separately): one system call at the instant, and a small request reaches the target
    in one segment."""

    def _send_output(self, message_body: Any = None, encode_chunked: bool = False) -> None:
        if not isinstance(message_body, bytes) or encode_chunked:
            super()._send_output(message_body, encode_chunked=encode_chunked)
            return
        buffer = self._buffer  # type: ignore[attr-defined]  # http.client's lines of the head, unsent
        buffer.extend((b"", b""))
        head = b"\r\n".join(buffer)
        del buffer[:]
        self.send(head + message_body)


class _Connection(_OneWrite, HTTPConnection):
    pass


class _TLSConnection(_OneWrite, HTTPSConnection):
    pass


def _new_connection(key: TargetKey) -> HTTPConnection:
    scheme, host, port, pinned = key
    if scheme != "https":
        return _Connection(pinned or host, port)
    if pinned is None:
        return _TLSConnection(host, port)
    # Connect to the checked address; TLS SNI and the certificate check still use the URL's host name.
    return _TLSConnection(pinned, port, server_hostname=host, assert_hostname=host)


@dataclass
class Prepared:
    """One attempt made ready to go: a connection to its target holding the request's head, unsent.

    The head is rendered into the connection's buffer ahead of the instant (http.client's putrequest and
    putheader); firing sends it with the body (endheaders) and nothing else.
    """

    connections: Connections | None  # None when it failed before any connection was taken
    key: TargetKey
    method: str
    path: str
    headers: dict[str, str]
    body: bytes | None
    timeout: float
    deadline: float = 0.0  # time.monotonic() by which the attempt is over, whatever the target does
    conn: HTTPConnection | None = None
    reused: bool = False
    error: str | None = None  # it could not be made ready: complete() reports this, nothing is sent
    # What is redacted from what is stored: the request's sensitive header and query values and the
    # secrets interpolated into it, as `redaction` spells them.
    secrets: tuple[str, ...] = ()
    _fired: float | None = field(default=None, repr=False)  # time.monotonic() of the write
    _send_error: Exception | None = field(default=None, repr=False)

    def fire(self) -> None:
        """Write the request. Never raises: a failure is reported by complete()."""
        if self.error is not None or self.conn is None:
            return
        self._fired = time.monotonic()
        self.deadline = min(self.deadline, self._fired + self.timeout)
        try:
            if self.reused and not self.conn.is_connected:
                # The target closed the idle connection while the run waited: open a fresh one.
                self._reopen()
            self._write()
        except (BrokenPipeError, ConnectionResetError) as exc:
            if not self.reused:
                self._send_error = exc
                return
            # A keep-alive connection closed under the write: the request did not get through.
            self._retry_on_new_connection()
        except Exception as exc:  # every transport failure becomes a recorded, classified attempt
            self._send_error = exc

    def awaiting(self) -> tuple[socket.socket | None, float]:
        """The socket the response will arrive on and the attempt's deadline, once fired; None when
        complete() has nothing to wait for (nothing was sent, or the write failed)."""
        if self.error is not None or self.conn is None or self._fired is None or self._send_error is not None:
            return None, 0.0
        return self.conn.sock, self.deadline

    def complete(self) -> Outcome:
        """Read the response (fire first), classify it and keep the connection if it can be reused."""
        if self.error is not None or self.conn is None:
            return Outcome(None, None, self.error, 0)
        if self._fired is None:
            raise RuntimeError("complete() before fire()")
        if self._send_error is not None:
            return self._failed(self._send_error)
        try:
            self.conn.response_class = partial(TimedResponse, deadline=self.deadline)  # type: ignore[assignment]
            # http.client's own response (urllib3's wrapper needs its request(), which renders at the instant).
            response = http.client.HTTPConnection.getresponse(self.conn)
            data = response.read(MAX_STORED_BODY_BYTES)
            whole = not response.read(1)
        except Exception as exc:  # every transport failure becomes a recorded, classified attempt
            return self._failed(exc)
        duration = self._elapsed_ms()
        if whole and self.conn.sock is not None and self.connections is not None:
            self.connections.give_back(self.key, self.conn)
        else:
            # Closed by the target, or a longer body than we keep: not worth draining.
            self.conn.close()
        outcome = _outcome(response.status, _stored_body(data, whole), response.getheader("retry-after"), duration)
        return self._redacted(outcome, cut=not whole)

    def render(self) -> None:
        """Buffer the request line and headers in the connection, unsent."""
        assert self.conn is not None
        self.conn.timeout = self.timeout
        names = {name.lower() for name in self.headers}
        self.conn.putrequest(self.method, self.path, skip_host=True, skip_accept_encoding="accept-encoding" in names)
        for name, value in self.headers.items():
            self.conn.putheader(name, value)

    def _reopen(self) -> None:
        assert self.conn is not None and self.connections is not None
        self.conn.close()
        self.conn, self.reused = self.connections.take(self.key)
        self.render()  # a new connection opens as it sends

    def _retry_on_new_connection(self) -> None:
        try:
            self._reopen()
            self._write()
        except Exception as exc:  # every transport failure becomes a recorded, classified attempt
            self._send_error = exc

    def _write(self) -> None:
        """Send the request within what is left of the attempt's time (a plain socket's sendall is
        bounded in all by its timeout); a new connection opens within it too."""
        assert self.conn is not None
        left = time_to_send(self.deadline)
        self.conn.timeout = left
        if self.conn.sock is not None:
            self.conn.sock.settimeout(left)
        self.conn.endheaders(self.body)

    def _failed(self, exc: Exception) -> Outcome:
        if self.conn is not None:
            self.conn.close()
        return self._redacted(Outcome(None, None, _describe_error(exc, self.timeout), self._elapsed_ms()))

    def _redacted(self, outcome: Outcome, cut: bool = False) -> Outcome:
        body, error = redact(outcome.body, self.secrets, cut), redact(outcome.error, self.secrets)
        return outcome if (body, error) == (outcome.body, outcome.error) else replace(outcome, body=body, error=error)

    def _elapsed_ms(self) -> int:
        return 0 if self._fired is None else int((time.monotonic() - self._fired) * 1000)


def prepare(
    connections: Connections, request: Mapping[str, Any], extra_headers: Mapping[str, str], timeout: float,
    pinned_address: str | None = None, started_at: datetime | None = None, signing: Signing | None = None,
    secrets: tuple[str, ...] = (),
) -> Prepared:
    """Make an attempt ready: no redirects will be followed (a redirect could point inside the network)
    and nothing is retried behind the caller's back.

    With `pinned_address` the connection goes to that IP (the one the SSRF guard checked) while Host,
    TLS SNI and certificate checks keep using the URL's host name: a second DNS answer cannot redirect it.
    `started_at` is when the attempt's time began (the executor passes the start Postgres recorded, which
    the sweeper counts from too); by default, now. The attempt is over `timeout` after it, and never more
    than `timeout` after it is fired. With `signing` the request carries Standard Webhooks signature
    headers over exactly the body sent; `secrets` are values interpolated into it, never stored.
    """
    begun = time.monotonic()
    start = begun if started_at is None else begun + started_at.timestamp() - time.time()
    parts = urlsplit(request["url"])
    host, port = host_and_port(request["url"])
    key: TargetKey = (parts.scheme, host, port, pinned_address)
    method = request.get("method", "GET")
    raw = request.get("body")
    body = raw.encode() if isinstance(raw, str) else raw
    headers = _request_headers(request.get("headers", {}), extra_headers, parts.netloc, method, body)
    # Judged before the signature headers join: they are computed at each attempt from a key that is never
    # sent, so they reveal nothing, and spelling out a new value each time would cost every attempt.
    hidden = secret_values(headers, parts.query, secrets)
    if signing is not None:
        headers = {n: v for n, v in headers.items() if n.lower() not in _SIGNATURE_HEADERS} | signing.headers(body)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    prepared = Prepared(connections, key, method, path, headers, body, timeout, deadline=start + timeout,
                        secrets=hidden)
    conn, prepared.reused = connections.take(key)
    prepared.conn = conn
    try:
        prepared.render()
    except ValueError:  # http.client refuses a header name or value that would corrupt the request
        conn.close()
        return replace(prepared, conn=None, error="refused: invalid request header")
    if not prepared.reused:
        try:
            conn.timeout = min(timeout, time_to_send(prepared.deadline))
            conn.connect()
        except Exception as exc:  # every transport failure becomes a recorded, classified attempt
            conn.close()
            return replace(prepared, conn=None, error=_describe_error(exc, timeout))
    return prepared


_SIGNATURE_HEADERS = frozenset({"webhook-id", "webhook-timestamp", "webhook-signature"})


def _request_headers(
    job_headers: Mapping[str, str], extra: Mapping[str, str], netloc: str, method: str, body: bytes | None,
) -> dict[str, str]:
    """The job's headers, then the run's; Host is the URL's and Content-Length the body's, always."""
    framing = {"host", "content-length", "transfer-encoding"}
    headers = {"User-Agent": USER_AGENT, **{n: v for n, v in job_headers.items() if n.lower() not in framing}}
    headers.update(extra)
    headers["Host"] = netloc.rsplit("@", 1)[-1]
    if body is not None or method.upper() in ("POST", "PUT", "PATCH"):
        headers["Content-Length"] = str(len(body or b""))
    return headers


def send(
    connections: Connections, request: Mapping[str, Any], extra_headers: Mapping[str, str], timeout: float,
    pinned_address: str | None = None,
) -> Outcome:
    """One attempt now: prepare, fire and complete."""
    prepared = prepare(connections, request, extra_headers, timeout, pinned_address)
    prepared.fire()
    return prepared.complete()


def failed_before_sending(error: str) -> Prepared:
    """An attempt stopped before any connection was made (the SSRF guard, a host that does not resolve):
    firing it does nothing and completing it reports `error`."""
    return Prepared(None, ("", "", 0, None), "", "", {}, None, 0.0, error=error)


def _outcome(status: int, body: str, retry_after: str | None, duration_ms: int) -> Outcome:
    error = None
    if 300 <= status < 400:
        error = "redirect not followed"
    elif status >= 400:
        error = f"HTTP {status}"
    return Outcome(status, body, error, duration_ms, _retry_after(retry_after, time.time()))


def _describe_error(exc: Exception, timeout: float) -> str:
    # Order matters: urllib3's NewConnectionError subclasses ConnectTimeoutError.
    if isinstance(exc, ux.NameResolutionError):
        return "connection failed: could not resolve host"
    if isinstance(exc, ux.NewConnectionError):
        return "connection failed: could not connect"
    if isinstance(exc, LateError):
        return f"timeout: not sent, the attempt's {timeout:g}s had run out before its request could be written"
    if isinstance(exc, (ux.SSLError, ssl.SSLError, ssl.CertificateError)):
        return "connection failed: TLS handshake error"
    if isinstance(exc, (ux.ConnectTimeoutError, ux.ReadTimeoutError, TimeoutError)):
        return f"timeout: no response within {timeout:g}s"
    if isinstance(exc, (ux.ProtocolError, http.client.HTTPException, ConnectionError)):
        return "connection failed: connection dropped before a response"
    return f"connection failed: {type(exc).__name__}"


def _retry_after(raw: str | None, now: float) -> float | None:
    if not raw:
        return None
    if raw.strip().isdigit():
        return float(raw.strip())
    try:
        return max(0.0, parsedate_to_datetime(raw).timestamp() - now)
    except (TypeError, ValueError):
        return None


def _stored_body(data: bytes, whole: bool) -> str:
    """What is kept of a response body (at most MAX_STORED_BODY_BYTES): text, with bytes that are not
    UTF-8 as U+FFFD; a body holding a NUL byte is binary (git's rule; PostgreSQL text cannot hold NUL
    either) and is kept as a note of its size."""
    if b"\x00" in data:
        size = f"{len(data)} bytes" if whole else f"more than {len(data)} bytes"
        return f"[binary body of {size}, not stored]"
    return data.decode("utf-8", errors="replace")


def request_timeout_seconds(request: Mapping[str, Any], ceiling: float) -> float:
    """The timeout the executor gives a job's request (the sweeper waits at least this long too)."""
    return min(float(request.get("timeout_seconds", DEFAULT_TIMEOUT_SECONDS)), ceiling)


def host_and_port(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
