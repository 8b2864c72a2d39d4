"""Sends HTTP attempts with urllib3 and describes what happened, without leaking secrets.

An attempt is taken in three steps, so that the instant a run is due costs one socket write:
`prepare` (ahead of the instant: take a warm keep-alive connection or open one, render the request),
`Prepared.fire` (at the instant: write the request) and `Prepared.complete` (read the response,
classify it, hand the connection back). `fire` never waits for the target: what the socket does not take
at once (a large request to a target not reading it), and a connection still to open, `complete` sees to
first, so that a group's writer goes on with the instant's other runs. A connection the target closed
while the run waited is replaced, never a failed attempt (tickwork.http.connections): checked before the
write, and moved once to a new connection when the write fails before a byte left or the connection is
reset before the target read the request (tickwork.http.deadline.AnswerWatch). A whole answer is the outcome,
whatever the connection does after it.

`timeout` bounds the attempt in all, not each socket operation: connecting, writing the request and
reading the status, headers and body share it, counted from the attempt's start (for the executor the
start Postgres recorded: the instant the run was due or, if later, when it was started), so a target
answering a byte at a time cannot hold an attempt past it, and the sweeper, waiting the same timeout
plus a margin, never retries an attempt still connected. (A TLS handshake, and a write over TLS, wait
per operation for what is left; either way no request starts to be written once the time is up.)

An attempt that failed says how far the request got (tickwork.http.attempt_errors): a failure kind, which
decides whether it is retried, and an error text built from it, never from the exception message. Values
of the request's secrets that a target echoes are redacted from what is kept of its answer.
"""
from __future__ import annotations

import http.client
import socket
import time
from dataclasses import dataclass, field, replace
from datetime import datetime
from email.utils import parsedate_to_datetime
from functools import partial
from typing import Any, Mapping
from urllib.parse import urlsplit

from urllib3.connection import HTTPConnection

from tickwork.http import attempt_errors as stages
from tickwork import defaults
from tickwork.http.connections import Connections, TargetKey, closed_by_peer
from tickwork.http.deadline import AnswerWatch, TimedResponse, time_to_send
from tickwork.http.redaction import redact, secret_values, spellings
from tickwork.http.sigv4 import SigV4
from tickwork.http.signing import Signing
from tickwork.outcome import Failure, FailureKind, Outcome
from tickwork.rules.success import status_failure

# Enough of a response to debug a failing target; history rows stay small.
MAX_STORED_BODY_BYTES = 4096
USER_AGENT = "Tickwork/0.1"
DEFAULT_TIMEOUT_SECONDS = defaults.REQUEST_TIMEOUT_SECONDS

@dataclass
class Prepared:
    """One attempt made ready to go (the HTTP kind's tickwork.targets.base.Attempt): a connection to its target
    holding the request's head, unsent.

    The head is rendered into the connection's buffer ahead of the instant (http.client's putrequest and
    putheader); firing sends it with the body (endheaders) and nothing else. With a `lead` (the target
    closes connections that wait: tickwork.http.connections) there is no connection yet: `connect` opens it
    that long before the instant, or `fire` at the instant.
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
    failure: Failure | None = None  # it could not be made ready: complete() reports this, nothing is sent
    # What is redacted from what is stored: the request's sensitive header and query values and the
    # secrets interpolated into it, as `redaction` spells them.
    secrets: tuple[str, ...] = ()
    lead: float | None = None  # connect at most this long before the instant; None: connected when made ready
    _fired: float | None = field(default=None, repr=False)  # time.monotonic() of the write
    _waited: float | None = field(default=None, repr=False)  # how long its open connection had waited, at the write
    _send_error: Exception | None = field(default=None, repr=False)
    _stage: str = field(default=stages.CONNECTING, repr=False)  # where fire() got to: what a failure means
    _unsent: bool = field(default=False, repr=False)  # fire() left (some of) the request for complete() to write
    _replaced: bool = field(default=False, repr=False)  # its request was moved to a new connection once already

    @property
    def error(self) -> str | None:
        return None if self.failure is None else self.failure.error

    def warm_lead(self) -> float | None:
        """How long before its instant `warm` is to open its connection: None when it has one, or opens it
        at the write (a lead of 0)."""
        return self.lead if self.lead and self.conn is None else None

    def warm(self, within: float) -> None:
        """Open its connection for a request written `within` seconds from now (`connect`)."""
        self.connect(within)

    def connect(self, within: float = 0.0) -> None:
        """Open (or take a kept) connection for a request written `within` seconds from now. Never
        raises: a failure is reported by complete()."""
        if self.failure is not None or self.conn is not None or self.connections is None:
            return
        self.conn, self.reused = self.connections.take(self.key, within)
        try:
            self.render()
        except ValueError:  # http.client refuses a header name or value that would corrupt the request
            self._give_up(Failure(FailureKind.REFUSED, "refused: invalid request header"))
            return
        if not self.reused:
            try:
                self.conn.timeout = min(self.timeout, time_to_send(self.deadline))
                self.conn.connect()
            except Exception as exc:  # every transport failure becomes a recorded, classified attempt
                self._give_up(stages.describe(exc, self.timeout, stages.CONNECTING))

    def fire(self) -> None:
        """Write what of the request the connection takes now, without waiting for the target: the rest,
        or all of it when a connection is still to open, complete() writes first. Never raises: a failure
        is reported by complete()."""
        if self.failure is not None:
            return
        self._fired = time.monotonic()
        self.deadline = min(self.deadline, self._fired + self.timeout)
        try:
            if self.conn is not None and self.conn.sock is not None:
                self._waited = self._fired - getattr(self.conn, "idle_since", self._fired)
                if closed_by_peer(self.conn.sock):
                    # The target closed it while it waited: nothing was sent, a new one takes the request.
                    self._closed_early()
                    self._reopen()
            self._write(wait=False)
        except Exception as exc:  # every transport failure becomes a recorded, classified attempt
            self._write_failed(exc, wait=False)

    def abandon(self) -> None:
        """Never to be sent (its run was dropped at its instant): close its connection, which holds the
        request's head unwritten and cannot be kept for another."""
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def awaiting(self) -> tuple[socket.socket | None, float]:
        """The socket the response will arrive on and the attempt's deadline, once fired; None when
        complete() has nothing to wait for (nothing was sent, or the write failed) or has to write first."""
        if (self.failure is not None or self.conn is None or self._fired is None or self._send_error is not None
                or self._unsent):
            return None, 0.0
        return self.conn.sock, self.deadline

    def finish_write(self) -> None:
        """Write what fire() left, waiting for the target within the attempt's time (complete() does it
        first). Never raises: a failure is reported by complete()."""
        if not self._unsent:
            return
        try:
            if getattr(self.conn, "unsent", None) is not None:  # written in part: the rest
                self.conn.send_rest()  # type: ignore[union-attr]
                self._unsent = False
            else:  # not begun: a connection was still to open
                self._write()
        except Exception as exc:  # every transport failure becomes a recorded, classified attempt
            self._unsent = False
            self._write_failed(exc)

    def complete(self) -> Outcome:
        """Read the response (fire first), classify it and keep the connection if it can be reused.

        A whole answer is the outcome, whatever the connection does after it (a close, a reset,
        `Connection: close`, HTTP/1.0): tickwork.http.deadline reads what arrived before either."""
        self.finish_write()
        if self.failure is not None:
            return Outcome.failed(self.failure)
        if self.conn is None or self._fired is None:
            raise RuntimeError("complete() before fire(), or after abandon()")
        if self._send_error is not None and not getattr(self.conn, "written", 0):
            return self._failed(self._send_error, self._stage)  # nothing left: there is nothing to answer
        watch = AnswerWatch()
        try:
            self.conn.response_class = partial(TimedResponse, deadline=self.deadline, watch=watch)  # type: ignore[assignment]
            # http.client's own response (urllib3's wrapper needs its request(), which renders at the instant).
            response = http.client.HTTPConnection.getresponse(self.conn)
        except Exception as exc:  # every transport failure becomes a recorded, classified attempt
            if self._send_error is not None:  # no answer to a request cut off while it was written
                return self._failed(self._send_error, stages.WRITING)
            if watch.unread and not self._replaced:
                # Reset before any answer: the target closed the connection before it read the request
                # (its keep-alive timeout fired as the request was on its way). Once, a new one takes it.
                self._closed_early()
                self._replace()
                return self.complete()
            return self._failed(exc, stages.AWAITING, unread=watch.unread)
        return self._read(response)

    def render(self) -> None:
        """Buffer the request line and headers in the connection, unsent."""
        assert self.conn is not None
        self.conn.timeout = self.timeout
        names = {name.lower() for name in self.headers}
        self.conn.putrequest(self.method, self.path, skip_host=True, skip_accept_encoding="accept-encoding" in names)
        for name, value in self.headers.items():
            self.conn.putheader(name, value)

    def _read(self, response: http.client.HTTPResponse) -> Outcome:
        try:
            data = response.read(MAX_STORED_BODY_BYTES)
            whole = not response.read(1)
            if whole and response.length:  # http.client's read(n) takes a Content-Length body cut short for an end
                raise http.client.IncompleteRead(data, response.length)
        except Exception as exc:  # every transport failure becomes a recorded, classified attempt
            response.close()
            return self._failed(exc, stages.READING, response.status)
        duration = self._elapsed_ms()
        assert self.conn is not None
        if whole and self.conn.sock is not None and self.connections is not None:
            self.connections.give_back(self.key, self.conn)
        else:
            # Closed by the target, or a longer body than we keep: not worth draining.
            response.close()
            self.conn.close()
        outcome = _outcome(response.status, stored_body(data, whole), response.getheader("retry-after"), duration)
        return self._redacted(outcome, cut=not whole)

    def _closed_early(self) -> None:
        if self.connections is not None and self._waited is not None:
            self.connections.closed_early(self.key, self._waited)

    def _reopen(self) -> None:
        assert self.conn is not None and self.connections is not None
        self.conn.close()
        self.conn, self.reused = self.connections.take(self.key)
        self._waited = None
        self.render()  # a new connection opens as it sends

    def _write(self, wait: bool = True) -> None:
        """Send the request within what is left of the attempt's time (no single wait of the socket may
        outlast it); a new connection opens within it too. Without `wait`, only what the socket takes at
        once, and no connection is opened: what is left is noted (`_unsent`) for complete()."""
        self._unsent = not wait and (self.conn is None or self.conn.sock is None)
        if self._unsent:
            return
        if self.conn is None:
            self.connect()  # connecting at the instant
            if self.failure is not None:
                return
        assert self.conn is not None
        left = time_to_send(self.deadline)
        self.conn.timeout = left
        self.conn.write_deadline = self.deadline  # type: ignore[attr-defined]
        self.conn.write_at_once = not wait  # type: ignore[attr-defined]
        if self.conn.sock is None:
            self._stage = stages.CONNECTING
            self.conn.connect()
        self._stage = stages.WRITING
        self.conn.endheaders(self.body)
        self._unsent = getattr(self.conn, "unsent", None) is not None

    def _write_failed(self, exc: Exception, wait: bool = True) -> None:
        """A write that failed before any byte of the request left, on a connection that was open
        already, is the target closing it under the write: once, a new connection takes the request."""
        nothing_sent = self._stage == stages.WRITING and not getattr(self.conn, "written", 0)
        if not (nothing_sent and isinstance(exc, ConnectionError) and self._waited is not None) or self._replaced:
            self._send_error = exc
            return
        self._closed_early()
        self._replace(wait)

    def _replace(self, wait: bool = True) -> None:
        """Write the request again on a new connection: the first never reached the target's application."""
        self._replaced = True
        self._send_error = None
        try:
            self._reopen()
            self._write(wait)
        except Exception as exc:  # every transport failure becomes a recorded, classified attempt
            self._send_error = exc

    def _give_up(self, failure: Failure) -> None:
        if self.conn is not None:
            self.conn.close()
        self.conn, self.failure = None, failure

    def _failed(self, exc: Exception, stage: str, status: int | None = None, unread: bool = False) -> Outcome:
        written = bool(getattr(self.conn, "written", 0))
        if self.conn is not None:
            self.conn.close()
        failure = stages.describe(exc, self.timeout, stage, status, written, unread)
        return self._redacted(Outcome.failed(failure, self._elapsed_ms()))

    def _redacted(self, outcome: Outcome, cut: bool = False) -> Outcome:
        body, error = redact(outcome.body, self.secrets, cut), redact(outcome.error, self.secrets)
        return outcome if (body, error) == (outcome.body, outcome.error) else replace(outcome, body=body, error=error)

    def _elapsed_ms(self) -> int:
        return 0 if self._fired is None else int((time.monotonic() - self._fired) * 1000)


def prepare(
    connections: Connections, request: Mapping[str, Any], extra_headers: Mapping[str, str], timeout: float,
    pinned_address: str | None = None, started_at: datetime | None = None, signing: Signing | None = None,
    secrets: tuple[str, ...] = (), sigv4: SigV4 | None = None,
) -> Prepared:
    """Make an attempt ready: no redirects will be followed (a redirect could point inside the network)
    and nothing is retried behind the caller's back.

    With `pinned_address` the connection goes to that IP (the one the SSRF guard checked) while Host,
    TLS SNI and certificate checks keep using the URL's host name: a second DNS answer cannot redirect it.
    `started_at` is when the attempt's time began (the executor passes the start Postgres recorded, which
    the sweeper counts from too); by default, now. The attempt is over `timeout` after it, and never more
    than `timeout` after it is fired. With `signing` the request carries Standard Webhooks signature
    headers over exactly the body sent, and with `sigv4` an AWS signature over the whole request as sent
    (tickwork.http.sigv4); `secrets` are values interpolated into it, never stored. The
    connection is opened now unless the target's `lead` says later (Prepared.connect, or at the write).
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
    if sigv4 is not None:  # last: it signs every header sent
        headers = sigv4.headers(method, f"{parts.scheme}://{headers['Host']}{path}", headers, body)
        hidden = tuple(sorted({*hidden, *spellings(sigv4.secrets(headers))}, key=len, reverse=True))
    prepared = Prepared(connections, key, method, path, headers, body, timeout, deadline=start + timeout,
                        secrets=hidden, lead=connections.lead(key))
    if prepared.lead is None:
        prepared.connect()
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


def failed_before_sending(failure: Failure) -> Prepared:
    """An attempt stopped before any connection was made (the SSRF guard, a host that does not resolve):
    firing it does nothing and completing it reports `failure`."""
    return Prepared(None, ("", "", 0, None), "", "", {}, None, 0.0, failure=failure)


def _outcome(status: int, body: str, retry_after: str | None, duration_ms: int) -> Outcome:
    error = None
    if 300 <= status < 400:
        error = "redirect not followed"
    elif status >= 400:
        error = f"HTTP {status}"
    return Outcome(status, body, error, duration_ms, _retry_after(retry_after, time.time()),
                   failure=status_failure(status))


def _retry_after(raw: str | None, now: float) -> float | None:
    if not raw:
        return None
    if raw.strip().isdigit():
        return float(raw.strip())
    try:
        return max(0.0, parsedate_to_datetime(raw).timestamp() - now)
    except (TypeError, ValueError):
        return None


def stored_body(data: bytes, whole: bool) -> str:
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
