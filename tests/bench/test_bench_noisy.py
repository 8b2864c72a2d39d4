"""The noisy-neighbour benchmark's pure parts (bench/noisy.py): what each misbehaving tenant asks the API for,
B's figures per window and issue 22's goal, the rows; and its misbehaving targets (bench/badtargets.py)."""
from __future__ import annotations

import socket
from typing import Any

import pytest

from bench import noisy
from bench.badtargets import BadTargets, _Sink
from tests.support import wait_for
from tickwork.api.models import MAX_BODY_CHARS, MAX_HEADERS, JobCreate
from tickwork.secrets.vault import MAX_VALUE_BYTES

URLS = {name: f"http://127.0.0.1:{port}/hook" for name, port in
        (("blackhole", 1001), ("stall", 1002), ("sink", 1003), ("refused", 1004))}
START_MS = 1_900_000_000_000


def test_a_mix_names_each_kind_once_with_a_count() -> None:
    assert noisy.parse_mix("blackhole=20, stall=0,catchup=5") == (("blackhole", 20), ("stall", 0), ("catchup", 5))
    for bad in ("blackhole=20,blackhole=1", "slowloris=3", "stall=-1", "stall"):
        with pytest.raises(ValueError, match="kind=count"):
            noisy.parse_mix(bad)


@pytest.mark.parametrize("kind", noisy.KINDS)
def test_every_misbehaving_job_is_one_the_api_model_accepts(kind: str) -> None:
    job = noisy.a_job(kind, 1, URLS, START_MS, noisy.EXPANSION_HEADERS)

    JobCreate.model_validate(job)
    assert job["name"] == f"a-{kind}-1" and job["schedule"] == noisy.EVERY_SECOND
    assert job["request"]["timeout_seconds"] == noisy.A_TIMEOUT_SECONDS


def test_each_kind_misbehaves_its_own_way() -> None:
    jobs = {kind: noisy.a_job(kind, 1, URLS, START_MS, 50) for kind in noisy.KINDS}

    assert jobs["blackhole"]["request"]["url"] == URLS["blackhole"]
    assert jobs["stall"]["request"]["url"] == URLS["stall"]
    assert len(jobs["stall"]["request"]["body"]) == MAX_BODY_CHARS
    assert jobs["catchup"]["catchup"] == "all" and "start_at" not in jobs["catchup"]
    assert jobs["catchup"]["request"]["url"] == URLS["sink"]
    assert jobs["notify"]["request"]["url"] == URLS["refused"] and jobs["notify"]["retry"]["max_attempts"] == 1
    assert jobs["notify"]["notify"] == {"url": URLS["blackhole"], "on": ["failure"]}
    assert all(job["start_at"] == "2030-03-17T17:46:40.000Z" for kind, job in jobs.items() if kind != "catchup")


def test_the_expansion_fills_the_body_and_headers_to_the_apis_limits() -> None:
    job = noisy.a_job("expansion", 1, URLS, START_MS, 50)
    request = job["request"]

    assert len(request["headers"]) == MAX_HEADERS
    assert MAX_BODY_CHARS - len(noisy.REFERENCE) < len(request["body"]) <= MAX_BODY_CHARS
    references = request["body"].count(noisy.REFERENCE) + sum(v.count(noisy.REFERENCE)
                                                                for v in request["headers"].values())
    assert noisy.expanded_bytes(job) == references * MAX_VALUE_BYTES  # nothing but references
    assert noisy.a_job("expansion", 1, URLS, START_MS, 80)["request"]["headers"] == request["headers"]


def _window(p99: float | None, succeeded: int, missed: int = 0, lost: int = 0, queued: int = 0,
            running: int = 0, retrying: int = 0) -> dict[str, Any]:
    lag = {"p50": p99, "p99": p99, "max": p99, "n": 1 if p99 is not None else 0}
    deliveries = {"delivered": succeeded, "duplicates": 0, "send_lag_ms": lag, "arrival_lag_ms": lag}
    statuses = {"succeeded": succeeded, "missed": missed, "lost": lost, "queued": queued, "running": running,
                "retrying": retrying}
    return noisy.b_window(deliveries, {k: v for k, v in statuses.items() if v}, 100)


def test_b_window_counts_what_is_left_and_what_has_no_row() -> None:
    w = _window(20.0, 80, missed=2, lost=1, queued=3, running=4, retrying=1)

    assert (w["success_rate"], w["missed"], w["lost"], w["queued"], w["running"], w["unrecorded"]) == (
        0.8, 2, 1, 3, 5, 9)


@pytest.mark.parametrize(("noisy_window", "expected"), [
    (_window(30.0, 100), {"lag": True, "success": True, "none_missed_or_lost": True}),
    (_window(30.1, 100), {"lag": False, "success": True, "none_missed_or_lost": True}),
    (_window(25.0, 99, queued=1), {"lag": True, "success": False, "none_missed_or_lost": True}),
    (_window(25.0, 99, lost=1), {"lag": True, "success": False, "none_missed_or_lost": False}),
    (_window(None, 0, missed=100), {"lag": False, "success": False, "none_missed_or_lost": False}),
])
def test_the_goal_is_issue_22s_three_conditions(noisy_window: dict[str, Any], expected: dict[str, bool]) -> None:
    verdict = noisy.goal(_window(20.0, 100), noisy_window)

    assert {k: verdict[k] for k in expected} == expected


def test_rows_show_both_windows_the_verdicts_and_what_a_did() -> None:
    kinds = {"blackhole": {"created": 20, "refused": {}, "statuses": {"running": 600},
                           "attempts": [["timed out", 40, 10_002], ["refused", 1, 3]]},
             "expansion": {"created": 0, "refused": {"400 invalid_input request.body: too big": 2},
                           "statuses": {}, "expanded_bytes_per_run": 67_000_000},
             "notify": {"created": 20, "refused": {}, "statuses": {"failed": 600},
                        "notifications": {"pending": 590, "sending": 10}}}
    mode = {"executor_processes": 2, "alone": _window(20.0, 100), "noisy": _window(25_000.0, 60, queued=40),
            "a": {"kinds": kinds, "targets": {"stall_connections": 3, "sink_requests": 4, "sink_bytes": 5_000_000}},
            "ticks": {"count": 46, "expected": 46}}
    plan = {"b_jobs": 100, "baseline_seconds": 15, "noisy_seconds": 30}

    table = noisy.rows({"plan": plan, "modes": [mode]})

    assert "executors in 2 processes" in table[0][0]
    cells = {row[0]: row[1:] for row in table[1:]}
    lag = cells["B send lag p50 / p99 / max"]
    assert lag[-1] == "p99 ≤ 1.5x alone: MISSED (1250.00x)"
    assert cells["B runs expected / delivered; succeeded"] == ("100 / 60; 60.0%", "100 / 100; 100.0%", "",
                                                              "success rate unchanged: MISSED")
    assert cells["B runs missed / lost / still queued / running / no row, 5 s after"][0] == "0 / 0 / 40 / 0 / 0"
    assert cells["A expansion: 0 jobs, refused: 2 x 400 invalid_input request.body: too big"] == (
        "none; 67 MB a run expanded",)
    assert cells["A notify: 20 jobs"] == ("failed 600; notifications pending 590, sending 10",)
    assert cells["A blackhole: 20 jobs"] == ("running 600; commonest attempt end: 40 x timed out (median 10,002 ms)",)
    assert cells["A's targets: stall connections; sink requests / bytes"] == ("3; 4 / 5 MB",)


class _Transport:
    def __init__(self) -> None:
        self.written = b""

    def write(self, data: bytes) -> None:
        self.written += data


def _request(body: bytes) -> bytes:
    return b"POST /hook HTTP/1.1\r\nHost: t\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body


def test_the_sink_answers_each_request_once_it_is_whole_however_it_arrives() -> None:
    counts = {"sink_requests": 0, "sink_bytes": 0}
    sink, transport = _Sink(counts), _Transport()
    sink.connection_made(transport)  # type: ignore[arg-type]
    first = _request(b"x" * 5000)
    data = first + _request(b"") + _request(b"abc")

    for i in range(0, len(first), 7):  # the first request's head and body in small pieces
        sink.data_received(first[i:i + 7])
    assert transport.written.count(b"200 OK") == 1
    sink.data_received(data[len(first):])  # the other two, pipelined in one read

    assert transport.written.count(b"200 OK") == 3
    assert counts == {"sink_requests": 3, "sink_bytes": len(data)}


def test_the_blackhole_never_completes_a_request_and_the_stall_never_reads() -> None:
    with BadTargets() as bad:
        ports = {name: int(url.rsplit(":", 1)[1].split("/")[0]) for name, url in bad.urls.items()}
        with socket.socket() as stuck:
            stuck.settimeout(0.5)
            try:
                stuck.connect(("127.0.0.1", ports["blackhole"]))
                stuck.sendall(_request(b"{}"))
                answer = stuck.recv(1)  # a connection the kernel completed is never accepted: no answer
            except (TimeoutError, socket.timeout):
                answer = None
            assert answer is None
        with socket.create_connection(("127.0.0.1", ports["stall"]), timeout=5) as stalled:
            stalled.setblocking(False)
            sent = 0
            with pytest.raises(BlockingIOError):  # the buffers fill: the target never reads
                for _ in range(10_000):
                    sent += stalled.send(b"x" * 65536)
            assert sent < 10_000 * 65536
            assert wait_for(lambda: bad.counts()["stall_connections"] == 1)  # (which collects its garbage)
            stalled.settimeout(0.2)
            with pytest.raises(TimeoutError):  # neither reset nor closed: it just never answers
                stalled.recv(1)
            assert bad.counts()["stall_open"] == 1
