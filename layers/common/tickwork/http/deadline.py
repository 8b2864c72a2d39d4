"""Reading an HTTP response under one deadline for the whole attempt, with http.client.

A socket timeout restarts with each read, so a target sending a byte every second never trips it;
here every read may only wait for what is left before the deadline.

A connection that ends before any byte of an answer ended one of two ways. Closed by a server that had
read the request (it may have acted on it, then crashed or timed out), it ends with a FIN. Closed by a
server that had not (its keep-alive or header timeout fired as the request was on its way), the request
meets a closed socket and the server's kernel answers it with a reset. `AnswerWatch` tells them apart:
on Linux the connection's TCP state says whether a reset came (TCP_INFO), waiting a few round trips for
it; elsewhere no reset is ever assumed.
"""
from __future__ import annotations

import http.client
import io
import socket
import ssl
import struct
import time
from dataclasses import dataclass
from typing import Any

from tickwork.errors import LateError

# Linux's TCP states (include/net/tcp_states.h): after a reset, CLOSE; after only a FIN, CLOSE_WAIT.
_TCP_CLOSE, _TCP_CLOSE_WAIT = 7, 8
_TCPI_RTT_OFFSET = 68  # struct tcp_info: tcpi_rtt, the smoothed round trip in microseconds
# How long a reset may trail the FIN: a few round trips, at least this (loopback's are microseconds).
MIN_RESET_WAIT_SECONDS = 0.01
RESET_WAIT_ROUND_TRIPS = 4


def time_to_send(deadline: float) -> float:
    """Seconds left before `deadline` to connect and write the request; raises LateError when none are."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise LateError()
    return left


@dataclass
class AnswerWatch:
    """What the response's reader saw of the answer: bytes received, and whether the connection ended
    with a reset before any (`unread`: the target never read the request)."""

    received: int = 0
    unread: bool = False

    def ended(self, sock: socket.socket, deadline: float, reset: bool) -> None:
        """The stream ended (`reset`: with a reset) after `received` bytes."""
        if not self.received:
            self.unread = reset or _reset_follows(sock, deadline)


def _reset_follows(sock: socket.socket, deadline: float) -> bool:
    """Whether the server's kernel resets a connection it closed, within a few round trips (Linux)."""
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    except (OSError, AttributeError):  # not Linux, or no longer a socket
        return False
    rtt = struct.unpack_from("I", info, _TCPI_RTT_OFFSET)[0] / 1e6
    until = min(deadline, time.monotonic() + max(MIN_RESET_WAIT_SECONDS, RESET_WAIT_ROUND_TRIPS * rtt))
    while True:
        state = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]
        if state == _TCP_CLOSE:
            return True
        if state != _TCP_CLOSE_WAIT or time.monotonic() >= until:
            return False
        time.sleep(0.0005)


class _DeadlineReader(io.RawIOBase):
    """A socket's bytes, each read waiting at most for what is left before the deadline.

    Past the deadline what has already arrived is still read (a response read late because the
    executor was busy is not a timeout of the target's), but nothing more is waited for.

    Like the reader socket.makefile() gives (it holds one), it keeps the socket open until it is closed
    itself: http.client closes the connection as soon as a response says it will close (HTTP/1.0,
    `Connection: close`, a body ended by the close) and reads the body through this reader afterwards.
    A connection reset reads as the end of the stream: what the target sent before it is still read,
    and http.client judges whether that was a whole answer (a body ended by the close) or not (no
    status line, a Content-Length or chunked body cut short)."""

    def __init__(self, sock: socket.socket, deadline: float, watch: AnswerWatch) -> None:
        self.sock, self.deadline, self.watch = sock, deadline, watch
        self._hold = sock.makefile("rb", buffering=0)  # counts as a reference: sock.close() waits for ours

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        self.sock.settimeout(max(0.0, self.deadline - time.monotonic()))
        try:
            received = self.sock.recv_into(buffer)
        except (BlockingIOError, ssl.SSLWantReadError) as exc:  # nothing had arrived (timeout 0: non-blocking)
            raise TimeoutError() from exc
        except ConnectionResetError:
            self.watch.ended(self.sock, self.deadline, reset=True)
            return 0
        if not received:
            self.watch.ended(self.sock, self.deadline, reset=False)
        self.watch.received += received
        return received

    def close(self) -> None:
        if not self.closed:
            self._hold.close()
        super().close()


class _DeadlineSocket:
    """What http.client's response reads from (`makefile` only): the connection's socket, under a deadline."""

    def __init__(self, sock: socket.socket, deadline: float, watch: AnswerWatch) -> None:
        self.sock, self.deadline, self.watch = sock, deadline, watch

    def makefile(self, mode: str) -> io.BufferedReader:
        return io.BufferedReader(_DeadlineReader(self.sock, self.deadline, self.watch))


class TimedResponse(http.client.HTTPResponse):
    """http.client's response, its status line, headers and body all read before the attempt's deadline."""

    def __init__(self, sock: socket.socket, debuglevel: int = 0, method: str | None = None, url: str | None = None,
                 *, deadline: float, watch: AnswerWatch) -> None:
        super().__init__(_DeadlineSocket(sock, deadline, watch), debuglevel, method, url)  # type: ignore[arg-type]
