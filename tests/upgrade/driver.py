"""The API side of the upgrade test: every request goes to one of the APIs up at that moment, the releases
taking turns, so a job one release wrote is read, changed, paused and run through the other.

ApiPool counts the requests each API is answering: one is taken out of the pool (before its runtime is
stopped) only once they are answered, so a stop never cuts a request and every answer can be judged.
"""
from __future__ import annotations

import itertools
import json
import random
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Callable

REQUEST_TIMEOUT_SECONDS = 15
# Between two steps of the driver: a few requests a second, as people and scripts send them.
STEP_SECONDS = 0.25


@dataclass(frozen=True)
class Call:
    via: str  # the API's label
    method: str
    route: str  # the path with ids left out
    status: int
    expected: int
    at: float

    @property
    def ok(self) -> bool:
        return self.status == self.expected


class ApiPool:
    def __init__(self, token: str) -> None:
        self.token = token
        self._urls: dict[str, str] = {}
        self._busy: dict[str, int] = {}
        self._changed = threading.Condition()
        self._turns = itertools.count()

    def add(self, label: str, url: str) -> None:
        with self._changed:
            self._urls[label], self._busy[label] = url, 0

    def remove(self, label: str) -> None:
        """Take it out of the pool once the requests it is answering are answered."""
        with self._changed:
            del self._urls[label]
            self._changed.wait_for(lambda: self._busy[label] == 0, REQUEST_TIMEOUT_SECONDS * 2)
            del self._busy[label]

    def labels(self) -> list[str]:
        with self._changed:
            return sorted(self._urls)

    def label_of(self, url: str) -> str | None:
        with self._changed:
            return next((label for label, base in self._urls.items() if url.startswith(base)), None)

    def request(self, method: str, path: str, body: Any = None, token: str | None = "",
                avoid: str | None = None) -> tuple[str, int, Any]:
        """(the API's label, status, JSON body); the APIs up take turns, `avoid` only when another is up."""
        with self._changed:
            labels = sorted(self._urls)
            if not labels:
                raise RuntimeError("no API is up")
            others = [label for label in labels if label != avoid] or labels
            label = others[next(self._turns) % len(others)]
            url, self._busy[label] = self._urls[label], self._busy[label] + 1
        try:
            return (label, *_send(method, url + path, body, self.token if token == "" else token))
        finally:
            with self._changed:
                self._busy[label] -= 1
                self._changed.notify_all()


def _send(method: str, url: str, body: Any, token: str | None) -> tuple[int, Any]:
    headers = {"content-type": "application/json"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_SECONDS) as answer:
            status, raw = answer.status, answer.read()
    except urllib.error.HTTPError as error:
        status, raw = error.code, error.read()
    return status, json.loads(raw) if raw else None


class ApiDriver:
    """Cycles through a job's life, each step through the API up next: create, get, patch, list, pause,
    resume, run by hand, its runs, delete. Its jobs fire once a year (never in the window); their manual runs
    are sent to `target_url` and must arrive once each, as every slot of the load."""

    def __init__(self, pool: ApiPool, target_url: str, seed: int = 32) -> None:
        self.pool, self.target_url = pool, target_url
        self.calls: list[Call] = []
        self.manual_runs: list[str] = []  # execution ids a 202 answered with
        self._retired: list[str] = []  # paths of jobs whose cycle is over
        self._rng = random.Random(seed)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="api-driver", daemon=True)
        self.errors: list[BaseException] = []

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(REQUEST_TIMEOUT_SECONDS * 4)

    def _run(self) -> None:
        try:
            for number in itertools.count():
                if self._stop.is_set():
                    return
                self._cycle(number)
        except BaseException as exc:  # recorded for the test to fail on: a driver that died proves nothing
            self.errors.append(exc)

    def _step(self, method: str, route: str, path: str, expected: int, body: Any = None) -> Any:
        if self._stop.wait(STEP_SECONDS * self._rng.uniform(0.5, 1.5)):
            raise _Stopped
        label, status, answer = self.pool.request(method, path, body)
        self.calls.append(Call(label, method, route, status, expected, time.time()))
        return answer if status == expected else None

    def _cycle(self, number: int) -> None:
        try:
            self._job_life(number)
        except _Stopped:
            return

    def _job_life(self, number: int) -> None:
        job = self._step("POST", "/jobs", "/jobs", 201, {
            "name": f"driver-{number}", "schedule": "0 0 1 1 *", "tags": ["upgrade"],
            "request": {"method": "POST", "url": f"{self.target_url}/load/driver-{number}", "body": "{}"}})
        if job is None:
            return
        path = f"/jobs/{job['id']}"
        self._step("GET", "/jobs/{id}", path, 200)
        self._step("PATCH", "/jobs/{id}", path, 200, {"description": f"patched {number}", "tags": ["upgrade", "p"],
                                                      "request": {"body": json.dumps({"n": number})}})
        self._step("GET", "/jobs", "/jobs?tag=upgrade&limit=20", 200)
        self._step("POST", "/jobs/{id}/pause", path + "/pause", 200)
        self._step("POST", "/jobs/{id}/resume", path + "/resume", 200)
        run = self._step("POST", "/jobs/{id}/run", path + "/run", 202)
        if run is not None:
            self.manual_runs.append(run["id"])
        self._step("GET", "/jobs/{id}/executions", path + "/executions", 200)
        self._step("GET", "/executions", "/executions?limit=20", 200)
        # A job is deleted a few cycles later, not at once: deleting it would skip its manual run if not yet sent.
        self._retired.append(path)
        if number % 3 == 0 and len(self._retired) > 2:
            self._step("DELETE", "/jobs/{id}", self._retired.pop(0), 204)


class _Stopped(Exception):
    """The driver was stopped between two steps."""


def callback_sender(pool: ApiPool) -> Callable[[str], tuple[str, int]]:
    """Completes a run by its callback URL, made by one release's API, through the other's when it is up:
    (the label of the API that answered, its status)."""
    def send(url: str) -> tuple[str, int]:
        path = "/callbacks/" + url.split("/callbacks/", 1)[1]
        label, status, _ = pool.request("POST", path, {"status": "succeeded"}, token=None, avoid=pool.label_of(url))
        return label, status
    return send
