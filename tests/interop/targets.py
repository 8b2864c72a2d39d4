"""The interop targets that run in the test process: Python's own `http.server`, and a raw-socket server
that resets each connection right after a complete answer.

Each answers by the path's last segment (tests.interop.shapes) and records every request it reads.
"""
from __future__ import annotations

import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from tests.interop.shapes import (
    ATTEMPT_HEADER,
    BIG_BODY,
    BODY,
    RUN_ID_HEADER,
    SLOW_FIRST_BYTE_SECONDS,
    Arrival,
    header,
    shape_of,
)

# Every case of a server connects at the same instants; the default backlog (5) would drop SYNs, a harness
# limit rather than the server behaviour under test.
LISTEN_BACKLOG = 64
# A connection the reset server accepted waits this long for its request (one opened ahead waits ~1.5 s).
REQUEST_WAIT_SECONDS = 10.0


class Recorder:
    """The arrivals of one in-process server, from its handler threads."""

    def __init__(self, port: int = 0) -> None:
        self.port = port
        self._arrivals: list[Arrival] = []
        self._lock = threading.Lock()

    def add(self, path: str, headers: Any) -> None:
        arrival = Arrival(self.port, path, header(headers, RUN_ID_HEADER), header(headers, ATTEMPT_HEADER))
        with self._lock:
            self._arrivals.append(arrival)

    def arrivals(self) -> list[Arrival]:
        with self._lock:
            return list(self._arrivals)


class ShapeHandler(BaseHTTPRequestHandler):
    """BaseHTTPRequestHandler as its users write one: send_response, headers, end_headers, then the body
    (a second write, so the body leaves in its own segment). Subclasses choose the protocol and timeout."""

    recorder: Recorder

    def _serve(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        if length:
            self.rfile.read(length)
        self.recorder.add(self.path, self.headers)
        answer: Callable[[], None] = getattr(self, f"_answer_{shape_of(self.path)}")
        answer()

    do_GET = do_POST = _serve

    def _answer_length(self, body: bytes = BODY) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _answer_big(self) -> None:
        self._answer_length(BIG_BODY)

    def _answer_slow(self) -> None:
        time.sleep(SLOW_FIRST_BYTE_SECONDS)
        self._answer_length()

    def _answer_close(self) -> None:
        """No length: the body ends when the server closes the connection."""
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(BODY)
        self.close_connection = True

    def _answer_chunked(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(BODY), BODY))
        self.wfile.write(b"0\r\n\r\n")

    def _answer_204(self) -> None:
        self.send_response(204)
        self.end_headers()

    def _answer_304(self) -> None:
        self.send_response(304)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


class HttpServerTarget:
    """Python's `http.server` (ThreadingHTTPServer) with a ShapeHandler on `protocol_version`; `timeout`
    is the handler's socket timeout (BaseHTTPRequestHandler.timeout: None waits forever)."""

    def __init__(self, protocol_version: str = "HTTP/1.0", timeout: float | None = None) -> None:
        self.recorder = Recorder()
        handler = type("Handler", (ShapeHandler,), {
            "protocol_version": protocol_version, "timeout": timeout, "recorder": self.recorder})

        class Server(ThreadingHTTPServer):
            request_queue_size = LISTEN_BACKLOG

        self.server = Server(("127.0.0.1", 0), handler)
        self.recorder.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.recorder.port}"
        self._thread = threading.Thread(target=self.server.serve_forever, name="interop-http-server", daemon=True)
        self._thread.start()

    def arrivals(self) -> list[Arrival]:
        return self.recorder.arrivals()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class ResetTarget:
    """Reads one request, writes a complete answer (Content-Length, and `Connection: close` on /close),
    then closes with SO_LINGER 0: the kernel sends RST instead of FIN, right behind the answer's last byte."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=LISTEN_BACKLOG)
        self.recorder = Recorder(self._listener.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.recorder.port}"
        self._closed = threading.Event()
        threading.Thread(target=self._accept, name="interop-reset-server", daemon=True).start()

    def arrivals(self) -> list[Arrival]:
        return self.recorder.arrivals()

    def close(self) -> None:
        self._closed.set()
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(REQUEST_WAIT_SECONDS)
        try:
            request = _read_request(conn)
            if request is not None:
                path, headers = request
                self.recorder.add(path, headers)
                close = b"Connection: close\r\n" if shape_of(path) == "close" else b""
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n%sContent-Length: %d\r\n\r\n%s"
                             % (close, len(BODY), BODY))
        except OSError:
            pass
        finally:
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()


def _read_request(conn: socket.socket) -> tuple[str, dict[str, str]] | None:
    """The path and headers of the one request on `conn` (its body read and dropped); None if it closed first."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65_536)
        if not chunk:
            return None
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(":", 1) for line in lines[1:] if ":" in line)
    headers = {name.strip(): value.strip() for name, value in headers.items()}
    length = int(header(headers, "Content-Length") or 0)
    while len(rest) < length:
        chunk = conn.recv(65_536)
        if not chunk:
            return None
        rest += chunk
    return lines[0].split(" ")[1], headers
