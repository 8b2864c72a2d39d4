"""The targets a misbehaving tenant points its jobs at, in one process of their own (bench/noisy.py):

- **blackhole**: a socket listened on with a backlog of 0 and never accepted, its one queue place taken by
  a connection of our own: the kernel drops every further SYN, so a connect hangs until its timeout (as at
  a firewalled port);
- **stall**: accepts every connection, with a receive buffer of STALL_RCVBUF bytes, and never reads:
  a large body fills the buffers and the write blocks, and no answer ever comes;
- **sink**: reads whatever it is sent and answers 200 once the request is whole (the catch-up backlog
  and the secret expansion go there: what they cost is their volume, not their target).

Closing the process resets every connection at once, so the runs still hanging on them end.
"""
from __future__ import annotations

import asyncio
import gc
import multiprocessing
import os
import socket
import threading
from typing import Any

from bench.target import stop_server

START_TIMEOUT_SECONDS = 10.0
REPLY_TIMEOUT_SECONDS = 10.0
# Linux doubles it and keeps a floor of a few KiB: the smallest window it will advertise.
STALL_RCVBUF = 1024
SINK_RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"
_HEAD_END = b"\r\n\r\n"


class _Stall(asyncio.Protocol):
    """Holds every connection it accepts (`held`): a transport whose reading is paused has no other
    reference, and one collected is closed, which resets the connection (unread bytes were left)."""

    def __init__(self, counts: dict[str, int], held: set[asyncio.BaseTransport]) -> None:
        self.counts = counts
        self.held = held

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.counts["stall_connections"] += 1
        self.held.add(transport)
        transport.pause_reading()  # type: ignore[attr-defined]

    def connection_lost(self, exc: Exception | None) -> None:
        self.held = {t for t in self.held if not t.is_closing()}


class _Sink(asyncio.Protocol):
    """Finds each request's head (searching only the bytes new since the last look), then counts its body
    out by Content-Length without keeping it."""

    def __init__(self, counts: dict[str, int]) -> None:
        self.counts = counts
        self.head = bytearray()
        self.body_left: int | None = None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.counts["sink_bytes"] += len(data)
        view = memoryview(data)
        while view:
            view = self._body(view) if self.body_left is not None else self._head(view)

    def _head(self, view: memoryview) -> memoryview:
        start = max(0, len(self.head) - 3)
        self.head += view
        end = self.head.find(_HEAD_END, start)
        if end < 0:
            return memoryview(b"")
        rest = memoryview(bytes(self.head[end + 4:]))
        self.body_left = _content_length(bytes(self.head[:end]))
        self.head = bytearray()
        return self._body(rest) if self.body_left else self._answer(rest)

    def _body(self, view: memoryview) -> memoryview:
        taken = min(len(view), self.body_left or 0)
        self.body_left = (self.body_left or 0) - taken
        return self._answer(view[taken:]) if self.body_left == 0 else view[taken:]

    def _answer(self, rest: memoryview) -> memoryview:
        self.body_left = None
        self.counts["sink_requests"] += 1
        if self.transport is not None:
            self.transport.write(SINK_RESPONSE)
        return rest


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value.strip() or 0)
    return 0


def _blackhole() -> tuple[socket.socket, socket.socket]:
    """A listener whose accept queue is full: our own connection holds its one place."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=0)
    filler = socket.create_connection(listener.getsockname())
    return listener, filler


def _stall_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, STALL_RCVBUF)  # inherited by accepted sockets
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    return sock


def _serve(conn: Any) -> None:
    counts = {"stall_connections": 0, "sink_requests": 0, "sink_bytes": 0}
    held: set[asyncio.BaseTransport] = set()
    loop = asyncio.new_event_loop()
    kept = _blackhole()
    stall = loop.run_until_complete(loop.create_server(lambda: _Stall(counts, held), sock=_stall_socket()))
    sink = loop.run_until_complete(loop.create_server(lambda: _Sink(counts), "127.0.0.1", 0, backlog=1024))
    conn.send({"blackhole": kept[0].getsockname()[1], "stall": stall.sockets[0].getsockname()[1],
               "sink": sink.sockets[0].getsockname()[1]})

    def control() -> None:
        while True:
            try:
                command = conn.recv()
            except EOFError:  # the parent is gone: don't outlive it
                os._exit(1)
            if command == "counts":
                gc.collect()  # what is open is what is held, not what the collector has not reached yet
                conn.send({**counts, "stall_open": sum(1 for t in list(held) if not t.is_closing())})
            else:
                conn.send("stopped")
                os._exit(0)  # every socket closes with the process: hanging clients are reset

    threading.Thread(target=control, daemon=True).start()
    loop.run_forever()


class BadTargets:
    """The three targets' process. `urls` once entered; `counts()`: what the stall and the sink saw."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._process = ctx.Process(target=_serve, args=(child,), name="bench-bad-targets", daemon=True)
        self._lock = threading.Lock()
        self.urls: dict[str, str] = {}

    def __enter__(self) -> BadTargets:
        self._process.start()
        if not self._conn.poll(START_TIMEOUT_SECONDS):
            raise RuntimeError("the misbehaving targets did not start")
        self.urls = {name: f"http://127.0.0.1:{port}/hook" for name, port in self._conn.recv().items()}
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def counts(self) -> dict[str, int]:
        with self._lock:
            self._conn.send("counts")
            if not self._conn.poll(REPLY_TIMEOUT_SECONDS):
                raise RuntimeError("the misbehaving targets did not answer")
            return self._conn.recv()

    def close(self) -> None:
        stop_server(self._conn, self._process)


def refused_url() -> str:
    """A loopback port nothing listens on (bound, then closed): every connect is refused at once."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"
