"""A fast local HTTP target in its own process: records who arrived when, answers 200 at once.

An asyncio protocol (no streams, no task per connection), HTTP/1.1 keep-alive, and only the parsing the
benchmark needs (the request line is skipped, three Tickwork headers and Content-Length are read). The
arrival time is taken when the socket's bytes are handed over, before they are parsed. The parent asks
for the records over a pipe; nothing is shared. With `close_after_answer` it answers `Connection: close`
and closes each connection after its answer, as HTTP/1.0 servers and gunicorn's sync worker do.

With `addresses=N` it listens on N loopback addresses (127.0.0.1, 127.0.0.2, ...: Linux routes all of 127/8 to
the loopback interface), a port each: a client's connections to one address and port share the ephemeral ports
(net.ipv4.ip_local_port_range, 28,232 by default), which an instant of 100,000 runs would run out of.
"""
from __future__ import annotations

import asyncio
import multiprocessing
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"
CLOSING_RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nok"
# Tickwork sends a few hundred connections at once under a burst: don't let the kernel refuse any.
BACKLOG = 4096
START_TIMEOUT_SECONDS = 10.0
REPLY_TIMEOUT_SECONDS = 30.0
DEFAULT_NICE = -15
# 127.0.0.1 to 127.0.0.254: the loopback addresses a target may spread over.
MAX_ADDRESSES = 254


@dataclass(frozen=True)
class Arrival:
    at: float  # epoch seconds when the request's head was read
    run_id: str
    job_id: str
    scheduled_for: str  # as sent (RFC 3339 from Tickwork, epoch seconds from the baseline)


class _Recorder:
    def __init__(self) -> None:
        self.records: list[tuple[float, bytes, bytes, bytes]] = []
        self.connections = 0

    def take(self) -> list[Arrival]:
        taken, self.records = self.records, []  # a single swap: the event loop keeps appending to the new list
        return [Arrival(at, r.decode(), j.decode(), s.decode()) for at, r, j, s in taken]


class _Connection(asyncio.Protocol):
    """One keep-alive connection, parsed straight from the bytes the socket gave (no stream, no task).

    The arrival time is read once per `data_received`, before any parsing: the moment the bytes left the
    kernel, the same for every request they complete. Requests may arrive split or pipelined.
    """

    def __init__(self, recorder: _Recorder, close_after_answer: bool, idle_timeout: float | None = None) -> None:
        self.recorder = recorder
        self.close_after_answer = close_after_answer
        self.idle_timeout = idle_timeout
        self.buffer = b""
        self.transport: asyncio.Transport | None = None
        self._idle: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.recorder.connections += 1
        self.transport = transport  # type: ignore[assignment]
        self._wait_idle()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._idle is not None:
            self._idle.cancel()

    def _wait_idle(self) -> None:
        """With `idle_timeout`, a connection that brings nothing for that long is closed, fresh or kept
        alive, as a server's header and keep-alive timeouts do."""
        if self._idle is not None:
            self._idle.cancel()
        if self.idle_timeout is not None and self.transport is not None:
            self._idle = asyncio.get_running_loop().call_later(self.idle_timeout, self.transport.close)

    def data_received(self, data: bytes) -> None:
        arrived = time.time()
        self._wait_idle()
        buffer = self.buffer + data if self.buffer else data
        while True:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                break
            request = _parse_head(buffer[:end])
            if request is None:  # not HTTP: drop the connection
                self.transport.close()
                self.buffer = b""
                return
            run, job, scheduled, length, keep_alive = request
            body_end = end + 4 + length
            if len(buffer) < body_end:
                break
            buffer = buffer[body_end:]
            self.recorder.records.append((arrived, run, job, scheduled))
            if self.close_after_answer or not keep_alive:
                self.transport.write(CLOSING_RESPONSE)
                self.transport.close()
                buffer = b""
                break
            self.transport.write(RESPONSE)
        self.buffer = buffer


def _parse_head(head: bytes) -> tuple[bytes, bytes, bytes, int, bool] | None:
    """Three Tickwork headers, Content-Length and Connection; the request line is skipped."""
    run = job = scheduled = b""
    length, keep_alive = 0, True
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"tickwork-run-id":
            run = value.strip()
        elif name == b"tickwork-job-id":
            job = value.strip()
        elif name == b"tickwork-scheduled-for":
            scheduled = value.strip()
        elif name == b"content-length":
            try:
                length = int(value)
            except ValueError:
                return None
        elif name == b"connection":
            keep_alive = value.strip().lower() != b"close"
    return run, job, scheduled, length, keep_alive


def _raise_priority(nice: int) -> int:
    """Run ahead of the benchmark's other processes when it may; returns the niceness in force."""
    if nice:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, nice)
        except OSError:  # a negative niceness needs root (CAP_SYS_NICE): share the cores equally
            pass
    return os.getpriority(os.PRIO_PROCESS, 0)


def loopback_addresses(count: int) -> list[str]:
    """The first `count` loopback addresses, from 127.0.0.1."""
    if not 1 <= count <= MAX_ADDRESSES:
        raise ValueError(f"a target spreads over 1 to {MAX_ADDRESSES} loopback addresses, not {count}")
    return [f"127.0.0.{n}" for n in range(1, count + 1)]


def _serve(conn: Any, nice: int, close_after_answer: bool, idle_timeout: float | None, addresses: int) -> None:
    nice_in_force = _raise_priority(nice)
    recorder = _Recorder()
    loop = asyncio.new_event_loop()
    listening = []
    for address in loopback_addresses(addresses):
        server = loop.run_until_complete(loop.create_server(
            lambda: _Connection(recorder, close_after_answer, idle_timeout), address, 0, backlog=BACKLOG,
            reuse_address=True))
        listening.append((address, server.sockets[0].getsockname()[1]))
    conn.send((listening, nice_in_force))

    def control() -> None:
        while True:
            try:
                command = conn.recv()
            except EOFError:  # the parent is gone (killed): don't outlive it
                os._exit(1)
            if command == "take":
                conn.send(recorder.take())
            elif command == "count":
                conn.send((len(recorder.records), recorder.connections))
            else:
                conn.send("stopped")
                os._exit(0)  # the records were taken: nothing to flush, and open keep-alive sockets don't matter

    threading.Thread(target=control, daemon=True).start()
    loop.run_forever()


class Target:
    """The target process. Use as a context manager; `take()` returns (and forgets) what arrived so far.

    nice: the target's scheduling niceness. A real target runs on hosts of its own; here it shares two
    cores with the executors, Postgres and Redis, and at equal priority its reads wait for a core: with
    the default it is scheduled first, so the arrival lag measures the path to the target, not the
    benchmark machine's contention (docs/benchmarks.md, "Arrival lag and the target's priority").
    `nice` tells what was in force (0 where raising it was not permitted).

    close_after_answer: answer `Connection: close` and close every connection after its answer (a target
    that never keeps a connection); by default connections are kept open as long as the client keeps them.
    idle_timeout: close a connection that brings no bytes for this many seconds, fresh or kept alive.
    addresses: how many loopback addresses it listens on (`urls`, one each; `url` is the first).
    """

    def __init__(self, nice: int = DEFAULT_NICE, close_after_answer: bool = False,
                 idle_timeout: float | None = None, addresses: int = 1) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._process = ctx.Process(target=_serve, args=(child, nice, close_after_answer, idle_timeout, addresses),
                                    name="bench-target", daemon=True)
        self._lock = threading.Lock()
        self.url = ""
        self.urls: list[str] = []
        self.nice = 0

    def __enter__(self) -> Target:
        self._process.start()
        if not self._conn.poll(START_TIMEOUT_SECONDS):
            raise RuntimeError("benchmark target did not start")
        listening, self.nice = self._conn.recv()
        self.urls = [f"http://{address}:{port}/hook" for address, port in listening]
        self.url = self.urls[0]
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ask(self, command: str) -> Any:
        with self._lock:
            self._conn.send(command)
            if not self._conn.poll(REPLY_TIMEOUT_SECONDS):
                raise RuntimeError(f"benchmark target did not answer {command!r}")
            return self._conn.recv()

    def take(self) -> list[Arrival]:
        return self._ask("take")

    def count(self) -> int:
        """Requests recorded and not taken yet."""
        return self._ask("count")[0]

    def connections(self) -> int:
        """TCP connections accepted since the target started."""
        return self._ask("count")[1]

    def close(self) -> None:
        stop_server(self._conn, self._process)


def stop_server(conn: Any, process: Any) -> None:
    """Ask a server process at the end of `conn` to stop; terminate it if it does not."""
    if process.is_alive():
        try:
            conn.send("stop")
        except OSError:
            pass
        process.join(5)
    if process.is_alive():
        process.terminate()
        process.join(5)
