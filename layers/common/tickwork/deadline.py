"""Reading an HTTP response under one deadline for the whole attempt, with http.client.

A socket timeout restarts with each read, so a target sending a byte every second never trips it;
here every read may only wait for what is left before the deadline.
"""
from __future__ import annotations

import http.client
import io
import socket
import ssl
import time
from typing import Any


class LateError(TimeoutError):
    """The attempt's time ran out before its request could be written: nothing was sent."""


def time_to_send(deadline: float) -> float:
    """Seconds left before `deadline` to connect and write the request; raises LateError when none are."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise LateError()
    return left


class _DeadlineReader(io.RawIOBase):
    """A socket's bytes, each read waiting at most for what is left before the deadline.

    Past the deadline what has already arrived is still read (a response read late because the
    executor was busy is not a timeout of the target's), but nothing more is waited for."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock, self.deadline = sock, deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        self.sock.settimeout(max(0.0, self.deadline - time.monotonic()))
        try:
            return self.sock.recv_into(buffer)
        except (BlockingIOError, ssl.SSLWantReadError) as exc:  # nothing had arrived (timeout 0: non-blocking)
            raise TimeoutError() from exc


class _DeadlineSocket:
    """What http.client's response reads from (`makefile` only): the connection's socket, under a deadline."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock, self.deadline = sock, deadline

    def makefile(self, mode: str) -> io.BufferedReader:
        return io.BufferedReader(_DeadlineReader(self.sock, self.deadline))


class TimedResponse(http.client.HTTPResponse):
    """http.client's response, its status line, headers and body all read before the attempt's deadline."""

    def __init__(self, sock: socket.socket, debuglevel: int = 0, method: str | None = None, url: str | None = None,
                 *, deadline: float) -> None:
        super().__init__(_DeadlineSocket(sock, deadline), debuglevel, method, url)  # type: ignore[arg-type]
