"""The benchmarks' HTTP target (bench/target.py): every request recorded once, whole, however it arrives."""
from __future__ import annotations

import socket
import time

from bench.target import Target
from tests.support import wait_for


def request(run: str, *, body: bytes = b"hello", close: bool = False) -> bytes:
    connection = b"Connection: close\r\n" if close else b""
    return (b"POST /hook HTTP/1.1\r\nHost: t\r\nTickwork-Run-Id: " + run.encode() + b"\r\nTickwork-Job-Id: j\r\n"
            b"Tickwork-Scheduled-For: 2030-01-01T00:00:00Z\r\n" + connection
            + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


def read_responses(sock: socket.socket, count: int) -> bytes:
    data = b""
    while data.count(b"HTTP/1.1 200 OK") < count:
        chunk = sock.recv(4096)
        assert chunk, f"connection closed after {data!r}"
        data += chunk
    return data


def test_split_pipelined_and_closing_requests_are_each_recorded_once() -> None:
    with Target() as target:
        port = int(target.url.rsplit(":", 1)[1].split("/")[0])
        with socket.create_connection(("127.0.0.1", port)) as kept:
            first = request("split")
            kept.sendall(first[:25])  # the head in two pieces, the body in a third
            time.sleep(0.05)
            kept.sendall(first[25:-2])
            time.sleep(0.05)
            kept.sendall(first[-2:] + request("piped-1") + request("piped-2", body=b""))
            read_responses(kept, 3)
        with socket.create_connection(("127.0.0.1", port)) as closing:
            closing.sendall(request("closing", close=True))
            read_responses(closing, 1)
            assert closing.recv(10) == b""  # the target closed it, as asked
        assert wait_for(lambda: target.count() >= 4), f"{target.count()} of 4 requests recorded"
        arrivals = target.take()
        assert [a.run_id for a in arrivals] == ["split", "piped-1", "piped-2", "closing"]
        assert {a.job_id for a in arrivals} == {"j"}
        assert {a.scheduled_for for a in arrivals} == {"2030-01-01T00:00:00Z"}
        assert arrivals[0].at <= arrivals[1].at == arrivals[2].at <= arrivals[3].at  # one read, one time
        assert target.connections() == 2 and target.take() == []
