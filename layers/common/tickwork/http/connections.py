"""Connections to targets: kept alive between attempts, checked before a request is written, and opened
no earlier before a run's instant than the target lets a connection wait.

A run's connection is opened (or an idle keep-alive one taken) while the run waits for its instant, so
that the instant costs one socket write. Servers close connections that wait: an idle keep-alive
connection after their keep-alive timeout (Node 5 s, uvicorn 5 s, gunicorn 2 s), a fresh one that has
sent nothing after their header timeout (often a minute; 1 s for a Python `http.server` handler with
`timeout = 1`). So a connection is checked just before its request is written, and one the target has
closed is replaced at once; nothing was sent on it. A target seen closing connections that waited is
remembered for a while (EARLY_CLOSE_MEMORY_SECONDS): its connections then wait at most half the shortest
wait it was seen closing (`Connections.safe_wait`): they are opened no earlier than that before the
instant (`Connections.lead`), and an idle one is only taken if it will not have waited longer by then.
"""
from __future__ import annotations

import socket
import ssl
import threading
import time
from collections import OrderedDict
from typing import Any, Callable

from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.util.ssl_ import create_urllib3_context
from urllib3.util.wait import wait_for_read

from tickwork.http.deadline import time_to_send

# Idle keep-alive connections kept per target: an execution environment runs one invocation at a time,
# which sends at most sending.MAX_PARALLEL_SENDS (50) requests at once.
MAX_IDLE_PER_TARGET = 64
# Idle connections kept in all: each is an open file, and Lambda allows an environment 1,024. Beyond this
# the least recently used target's oldest are closed.
MAX_IDLE = 256
# How long a target that closed a waiting connection keeps its connections opened late: long enough not to
# learn it again every few runs, short enough that a restart of the target (which closes every connection
# at once, whatever their age) does not change how it is served for long.
EARLY_CLOSE_MEMORY_SECONDS = 300.0
# A lead shorter than this is not worth a separate connect before the instant: connect at the instant.
MIN_LEAD_SECONDS = 0.02

# (scheme, host, port, pinned address): a connection pinned to a checked address is only reused for it.
TargetKey = tuple[str, str, int, str | None]


class _OneWrite(HTTPConnection):
    """The request's head and its body leave in one socket send, not two (http.client's own endheaders
    sends the body separately): one system call at the instant, and a small request reaches the target
    in one segment. It counts the bytes the socket took (`written`), so that a failed write tells whether
    any of the request left, and never waits past `write_deadline` (time.monotonic()).

    With `write_at_once` it does not wait at all: the socket takes what it can now, and what it does not
    (`unsent`: a target not reading a large request) is left for `send_rest`, so that a group's writer
    never waits on one target while the instant's other requests are due."""

    written = 0
    write_deadline: float | None = None
    write_at_once = False
    unsent: memoryview | None = None
    idle_since = 0.0  # time.monotonic() since the connection has had nothing to do: connected, or answered

    def connect(self) -> None:
        super().connect()
        self.idle_since = time.monotonic()

    def putrequest(self, *args: Any, **kwargs: Any) -> None:
        self.written, self.unsent = 0, None
        super().putrequest(*args, **kwargs)

    def send(self, data: Any) -> None:
        if not isinstance(data, (bytes, bytearray)):
            super().send(data)
            return
        if self.sock is None:
            self.connect()
        self.unsent = memoryview(data)
        if self.write_at_once:
            self._send_now()
        else:
            self.send_rest()

    def send_rest(self) -> None:
        """Send what is left of the request, waiting for the target at most until `write_deadline`."""
        view = self.unsent
        while view:
            if self.write_deadline is not None:
                self.sock.settimeout(time_to_send(self.write_deadline))
            view = self._sent(view, self.sock.send(view))
        self.unsent = None

    def _send_now(self) -> None:
        self.sock.settimeout(0.0)
        view = self.unsent
        try:
            while view:
                view = self._sent(view, self.sock.send(view))
        except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
            return  # the socket is full: TLS asks for the same bytes again, which `unsent` holds
        self.unsent = None

    def _sent(self, view: memoryview, sent: int) -> memoryview:
        self.written += sent
        self.unsent = view[sent:]
        return self.unsent

    def _send_output(self, message_body: Any = None, encode_chunked: bool = False) -> None:
        if not isinstance(message_body, bytes) or encode_chunked:
            super()._send_output(message_body, encode_chunked=encode_chunked)
            return
        buffer = self._buffer  # type: ignore[attr-defined]  # http.client's lines of the head, unsent
        buffer.extend((b"", b""))
        head = b"\r\n".join(buffer)
        del buffer[:]
        self.send(head + message_body)


class _Connection(_OneWrite):
    pass


class _TLSConnection(_OneWrite, HTTPSConnection):
    pass


def closed_by_peer(sock: socket.socket) -> bool:
    """Whether a connection with no request outstanding can no longer carry one: the target closed or
    reset it, or sent something nobody asked for (a 408 before closing). One poll while it is good.

    Over TLS a readable socket may only hold session tickets the server sent after the handshake: they
    are read (OpenSSL keeps them) and the connection is still good."""
    if not wait_for_read(sock, timeout=0.0):
        return False
    timeout = sock.gettimeout()
    sock.settimeout(0.0)
    try:
        if isinstance(sock, ssl.SSLSocket):
            sock.recv(1)
        else:
            sock.recv(1, socket.MSG_PEEK)
        return True  # the end of the stream, or bytes before any request
    except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
        return False  # nothing for the application: still open
    except OSError:
        return True  # reset
    finally:
        sock.settimeout(timeout)


class Connections:
    """Keep-alive connections per target, reused across the invocations of one execution environment,
    and what has been learned of how long each target lets a connection wait.

    A connection is out (owned by one attempt) or idle here; an idle one the target closed meanwhile is
    noticed when taken and discarded. `connect_ahead=False` opens every connection at its run's instant
    (a connect of lag per run that needs a new one); `ca_bundle` names CAs trusted for HTTPS targets
    besides the system's.
    """

    def __init__(self, max_idle_per_target: int = MAX_IDLE_PER_TARGET, max_idle: int = MAX_IDLE,
                 connect_ahead: bool = True, ca_bundle: str = "",
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_idle_per_target = max_idle_per_target
        self.max_idle = max_idle
        self.connect_ahead = connect_ahead
        self.ca_bundle = ca_bundle
        self._clock = clock
        self._idle: OrderedDict[TargetKey, list[HTTPConnection]] = OrderedDict()  # least recently used first
        self._count = 0
        self._early: dict[TargetKey, tuple[float, float]] = {}  # key -> (shortest wait seen closed, when)
        self._tls: ssl.SSLContext | None = None
        self._lock = threading.Lock()

    def lead(self, key: TargetKey) -> float | None:
        """How long before its instant a run's connection to `key` may be opened: None, as early as it is
        made ready; 0.0, at the instant."""
        if not self.connect_ahead:
            return 0.0
        wait = self.safe_wait(key)
        if wait is None:
            return None
        return wait if wait >= MIN_LEAD_SECONDS else 0.0

    def safe_wait(self, key: TargetKey) -> float | None:
        """How long a connection to `key` may wait with nothing to do: half the shortest wait after which
        the target was seen closing one (while remembered), so that a target timing out exactly when a
        run is due (a keep-alive timeout equal to the job's interval) is not raced; None: not limited."""
        with self._lock:
            seen = self._early.get(key)
            if seen is not None and self._clock() - seen[1] > EARLY_CLOSE_MEMORY_SECONDS:
                del self._early[key]
                seen = None
        return None if seen is None else seen[0] / 2

    def closed_early(self, key: TargetKey, waited: float) -> None:
        """`key` closed a connection that had waited `waited` seconds with nothing to do."""
        with self._lock:
            seen = self._early.get(key)
            self._early[key] = (waited if seen is None else min(seen[0], waited), self._clock())

    def take(self, key: TargetKey, within: float | None = None) -> tuple[HTTPConnection, bool]:
        """A connection to `key` and whether it is a reused (already open) one. `within`: how long it may
        wait before its request; an idle one the target would have closed by then is not taken."""
        limit = None if within is None else self.safe_wait(key)
        while (conn := self._pop(key)) is not None:
            waited = self._clock() - getattr(conn, "idle_since", 0.0)
            fresh_enough = limit is None or waited + (within or 0.0) < limit
            if conn.sock is not None and fresh_enough and not closed_by_peer(conn.sock):
                return conn, True
            conn.close()
        return self.new(key), False

    def new(self, key: TargetKey) -> HTTPConnection:
        """A connection to `key`, not yet open."""
        scheme, host, port, pinned = key
        if scheme != "https":
            return _Connection(pinned or host, port)
        context = self.tls_context()
        if pinned is None:
            return _TLSConnection(host, port, ssl_context=context)
        # Connect to the checked address; TLS SNI and the certificate check still use the URL's host name.
        return _TLSConnection(pinned, port, server_hostname=host, assert_hostname=host, ssl_context=context)

    def tls_context(self) -> ssl.SSLContext:
        """One context for every TLS connection of the environment (loading the system's CAs for each
        connection costs milliseconds): urllib3's defaults, the system's CAs and `ca_bundle`'s."""
        with self._lock:
            if self._tls is None:
                context = create_urllib3_context()
                context.load_default_certs()
                if self.ca_bundle:
                    context.load_verify_locations(cafile=self.ca_bundle)
                self._tls = context
            return self._tls

    def give_back(self, key: TargetKey, conn: HTTPConnection) -> None:
        conn.idle_since = self._clock()  # type: ignore[attr-defined]
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
