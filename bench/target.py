"""A fast local HTTP target in its own process: records who arrived when, answers 200 at once.

asyncio streams, HTTP/1.1 keep-alive, and only the parsing the benchmark needs (the request line is
skipped, three Tickwork headers and Content-Length are read). The arrival time is taken as soon as a
request's head has been read. The parent asks for the records over a pipe; nothing is shared.
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
# Tickwork sends a few hundred connections at once under a burst: don't let the kernel refuse any.
BACKLOG = 4096
START_TIMEOUT_SECONDS = 10.0
REPLY_TIMEOUT_SECONDS = 30.0


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

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while await self._one(reader, writer):
                pass
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        head = await reader.readuntil(b"\r\n\r\n")
        arrived = time.time()
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
                length = int(value)
            elif name == b"connection":
                keep_alive = value.strip().lower() != b"close"
        if length:
            await reader.readexactly(length)
        self.records.append((arrived, run, job, scheduled))
        writer.write(RESPONSE)
        return keep_alive

    def take(self) -> list[Arrival]:
        taken, self.records = self.records, []  # a single swap: the event loop keeps appending to the new list
        return [Arrival(at, r.decode(), j.decode(), s.decode()) for at, r, j, s in taken]


def _serve(conn: Any) -> None:
    recorder = _Recorder()
    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(
        asyncio.start_server(recorder.handle, "127.0.0.1", 0, backlog=BACKLOG, reuse_address=True))
    conn.send(server.sockets[0].getsockname()[1])

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
    """The target process. Use as a context manager; `take()` returns (and forgets) what arrived so far."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._process = ctx.Process(target=_serve, args=(child,), name="bench-target", daemon=True)
        self._lock = threading.Lock()
        self.url = ""

    def __enter__(self) -> Target:
        self._process.start()
        if not self._conn.poll(START_TIMEOUT_SECONDS):
            raise RuntimeError("benchmark target did not start")
        self.url = f"http://127.0.0.1:{self._conn.recv()}/hook"
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
        if self._process.is_alive():
            try:
                self._conn.send("stop")
            except OSError:
                pass
            self._process.join(5)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join(5)
