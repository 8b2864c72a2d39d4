"""What every interop target answers, by the last segment of the requested path, and how it records arrivals.

Shared by the in-process servers and the Python applications run by uvicorn, gunicorn and aiohttp (the
Node target, tests/interop/apps/node_target.js, spells the same constants). An arrival is recorded when
the request has been read, before it is answered, so a run whose answer Tickwork misjudged still counts.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Mapping

BODY = b"ok"
# Well over tickwork.http.delivery.MAX_STORED_BODY_BYTES (4096): numbered lines, so a cut shows where it fell.
BIG_BODY = b"".join(b"%06d\n" % line for line in range(15_000))  # 105,000 bytes
# Long enough that the answer is read well after the request went out, well inside the jobs' timeout.
SLOW_FIRST_BYTE_SECONDS = 1.5
RUN_ID_HEADER = "Tickwork-Run-Id"
ATTEMPT_HEADER = "Tickwork-Attempt"
# The file a target process appends its arrivals to (one JSON object a line).
LOG_VARIABLE = "INTEROP_ARRIVALS"


@dataclass(frozen=True)
class Arrival:
    """One request as a target read it: where it was sent and which run and attempt it carried."""

    port: int
    path: str
    run_id: str
    attempt: str


def shape_of(path: str) -> str:
    return path.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]


def header(headers: Mapping[str, str], name: str) -> str:
    """A header's value whatever the server's spelling of names (WSGI, ASGI and http.server differ)."""
    wanted = name.lower()
    return next((value for key, value in headers.items() if key.lower() == wanted), "")


def log_arrival(path: str, port: int, headers: Mapping[str, str]) -> None:
    """Append one arrival to the process's log file: one write of one line, atomic between processes."""
    line = json.dumps({"port": port, "path": path, "run_id": header(headers, RUN_ID_HEADER),
                       "attempt": header(headers, ATTEMPT_HEADER)}) + "\n"
    fd = os.open(os.environ[LOG_VARIABLE], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def read_arrivals(log: str) -> list[Arrival]:
    """The arrivals a log holds (nginx writes the same fields, its port and attempt as strings)."""
    if not os.path.exists(log):
        return []
    with open(log, encoding="utf-8") as lines:
        records = [json.loads(line) for line in lines if line.strip()]
    return [Arrival(int(r["port"]), r["path"], r["run_id"], str(r["attempt"])) for r in records]
