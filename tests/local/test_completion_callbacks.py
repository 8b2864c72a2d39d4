"""Completion callbacks end to end on the local runtime: a stock http.server target answers 202 and, from
another thread, POSTs to the Tickwork-Callback-Url it was sent. Real PostgreSQL and Redis, the wall clock."""
from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

import pytest

from tests.local.test_local_runtime import call, runtime  # noqa: F401 (the fixture, found by name)
from tests.support import wait_for
from tickwork_local.runtime import LocalRuntime

pytestmark = pytest.mark.slow

WAIT_SECONDS = 20.0


class CallingBack:
    """A stock http.server: answers 202 at once, then reports `report` to the callback URL 0.3 s later, after
    calling `first` (what happens while the target works)."""

    def __init__(self, report: dict[str, Any], first: Callable[[], Any] = lambda: None) -> None:
        self.urls: list[str] = []
        self.answers: list[tuple[int, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                self.rfile.read(int(self.headers.get("content-length") or 0))
                url = self.headers["Tickwork-Callback-Url"]
                outer.urls.append(url)
                self.send_response(202)
                self.end_headers()
                self.wfile.write(b"accepted, working on it")
                threading.Timer(0.3, outer.call_back, (url,)).start()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/work"
        self.report = report
        self.first = first
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def call_back(self, url: str) -> None:
        self.first()
        self.answers.append(post(url, self.report))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def post(url: str, body: Any) -> tuple[int, Any]:
    request = urllib.request.Request(url, method="POST", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def test_a_run_ends_when_its_target_calls_back_and_a_second_call_changes_nothing(runtime: LocalRuntime) -> None:
    target = CallingBack({"status": "succeeded", "output": "42 rows exported"})
    try:
        status, job = call(runtime, "POST", "/jobs", {
            "name": "long-export", "schedule": "0 0 0 1 1 *",  # a run by hand only
            "request": {"method": "POST", "url": target.url, "body": "{}"},
            "completion": {"mode": "callback", "timeout_seconds": 600}})
        assert status == 201, job
        assert job["completion"] == {"mode": "callback", "timeout_seconds": 600}
        status, run = call(runtime, "POST", f"/jobs/{job['id']}/run")
        assert status == 202, run

        assert wait_for(lambda: len(target.answers) == 1, timeout=WAIT_SECONDS), target.urls
        url = target.urls[0]
        assert url.startswith(f"{runtime.api_url}/callbacks/{run['id']}/1/")
        assert target.answers[0] == (200, {"execution_id": run["id"], "attempt": 1, "status": "succeeded"})

        _, detail = call(runtime, "GET", f"/executions/{run['id']}")
        assert (detail["status"], detail["attempt_count"], detail["completion_deadline"]) == ("succeeded", 1, None)
        attempt = detail["attempts"][0]
        assert (attempt["status_code"], attempt["response_body"], attempt["output"], attempt["error"]) == (
            202, "accepted, working on it", "42 rows exported", None)

        again = post(url, {"status": "failed"})
        assert again[0] == 409, again
        forged = post(url[:-4] + "AAAA", {"status": "failed"})
        assert forged[0] == 404, forged
        _, after = call(runtime, "GET", f"/executions/{run['id']}")
        assert after["status"] == "succeeded" and after["attempts"] == detail["attempts"]
    finally:
        target.close()


def test_a_completion_after_the_jobs_secret_was_deleted_ends_the_run(runtime: LocalRuntime) -> None:
    """The secret the attempt was sent with is deleted while the target works: its callback still ends the run
    (it answered 500 and the completion was lost)."""
    assert call(runtime, "PUT", "/secrets/EXPORT_TOKEN", {"value": "export-token-51c7e2"})[0] == 201
    target = CallingBack({"status": "succeeded", "output": "42 rows exported"},
                         first=lambda: call(runtime, "DELETE", "/secrets/EXPORT_TOKEN"))
    try:
        status, job = call(runtime, "POST", "/jobs", {
            "name": "export-with-secret", "schedule": "0 0 0 1 1 *",
            "request": {"method": "POST", "url": target.url,
                        "headers": {"Authorization": "Bearer ${secrets.EXPORT_TOKEN}"}},
            "completion": {"mode": "callback", "timeout_seconds": 600}})
        assert status == 201, job
        status, run = call(runtime, "POST", f"/jobs/{job['id']}/run")
        assert status == 202, run

        assert wait_for(lambda: len(target.answers) == 1, timeout=WAIT_SECONDS), target.urls
        assert target.answers[0] == (200, {"execution_id": run["id"], "attempt": 1, "status": "succeeded"})
        assert "EXPORT_TOKEN" not in {item["name"] for item in call(runtime, "GET", "/secrets")[1]["items"]}
        _, detail = call(runtime, "GET", f"/executions/{run['id']}")
        assert (detail["status"], detail["attempts"][0]["output"]) == ("succeeded", "42 rows exported")
    finally:
        target.close()
