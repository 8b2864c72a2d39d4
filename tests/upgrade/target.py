"""The stock target of the upgrade test: Python's http.server as its users write one (HTTP/1.0, the head and
then the body in a second write, no Content-Length, the connection closed after each answer), recording
every request it reads, and answering by the path's first segment:

- /load/...: 200;
- /flaky/...: 500 to a run's first attempt, 200 after (its retry goes through the due index);
- /doomed/...: 500 (the run fails for good and its job's `run.failed` notification follows);
- /notify/...: 200 (a notification);
- /callback/...: 202, then the run is completed by `complete_run` with its Tickwork-Callback-Url (sent to
  the other release's API, when it runs: a token one release made, checked by the other).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

RUN_ID = "Tickwork-Run-Id"
ATTEMPT = "Tickwork-Attempt"
CALLBACK_URL = "Tickwork-Callback-Url"


@dataclass(frozen=True)
class Arrival:
    at: float  # wall clock, when the request had been read
    kind: str  # the path's first segment
    path: str
    run_id: str
    attempt: int


@dataclass(frozen=True)
class Callback:
    run_id: str
    via: str  # the label of the API that answered
    status: int  # 0: no API answered


class UpgradeTarget:
    def __init__(self, complete_run: Callable[[str], tuple[str, int]]) -> None:
        self.arrivals: list[Arrival] = []
        self.callbacks: list[Callback] = []
        self._lock = threading.Lock()
        self._complete_run = complete_run
        target = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                if length:
                    self.rfile.read(length)
                arrival = Arrival(time.time(), self.path.strip("/").split("/", 1)[0], self.path,
                                  self.headers.get(RUN_ID, ""), int(self.headers.get(ATTEMPT) or 0))
                target.record(arrival)
                status = target.status_for(arrival)
                self.send_response(status)
                self.end_headers()
                self.wfile.write(b"ok")
                if arrival.kind == "callback" and self.headers.get(CALLBACK_URL):
                    threading.Thread(target=target.complete, args=(arrival.run_id, self.headers[CALLBACK_URL]),
                                     daemon=True).start()

            do_GET = do_POST = _serve

            def log_message(self, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            request_queue_size = 256  # a second's runs connect at once
            daemon_threads = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def record(self, arrival: Arrival) -> None:
        with self._lock:
            self.arrivals.append(arrival)

    @staticmethod
    def status_for(arrival: Arrival) -> int:
        if arrival.kind == "doomed" or (arrival.kind == "flaky" and arrival.attempt == 1):
            return 500
        return 202 if arrival.kind == "callback" else 200

    def complete(self, run_id: str, url: str) -> None:
        time.sleep(0.2)  # after Tickwork recorded the 202, as a worker finishing its job would call
        try:
            via, status = self._complete_run(url)
        except (OSError, RuntimeError):  # no API up, or none answered
            via, status = "", 0
        with self._lock:
            self.callbacks.append(Callback(run_id, via, status))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
