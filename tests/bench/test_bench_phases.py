"""`python -m bench` runs each benchmark inside a guard (bench/phases.py): a phase that raises is reported
as skipped and costs no other phase its rows, its --json figures or its place in the doc. Nothing here
runs a benchmark or touches a server: the phases are stand-ins, and the machine's description is faked."""
from __future__ import annotations

import io
import json
import logging
from pathlib import Path
from typing import Any, Iterator

import pytest

from bench.phases import Phase, Unavailable, run_phases


def _fails() -> Any:
    raise RuntimeError("the cluster\nwould not start | at all")


def _lacks_a_tool() -> Any:
    raise Unavailable("needs redis-server")


def _phases() -> list[Phase]:
    return [
        Phase("first", "First", "first", lambda: {"n": 1}, lambda r: [("First",), ("runs", str(r["n"]))]),
        Phase("broken", "Broken phase", "broken", _fails, lambda r: [("never",)]),
        Phase("missing", "Missing tool", "missing", _lacks_a_tool),
        Phase("last", "Last", "last", lambda: {"n": 2}, lambda r: [("Last",), ("runs", str(r["n"]))]),
    ]


def test_a_phase_that_raises_is_skipped_and_the_phases_around_it_keep_their_rows() -> None:
    out, errors = io.StringIO(), io.StringIO()

    outcome = run_phases(_phases(), out, errors)

    assert outcome.rows == [
        ("First",), ("runs", "1"),
        ("Broken phase: skipped: RuntimeError: the cluster would not start / at all",),
        ("Missing tool: skipped: needs redis-server",),
        ("Last",), ("runs", "2"),
    ]
    assert outcome.results == {"first": {"n": 1}, "last": {"n": 2}}
    assert outcome.skipped == {"broken": "RuntimeError: the cluster\nwould not start | at all",
                               "missing": "needs redis-server"}
    assert outcome.failed == ["broken"]  # a missing tool is not a failure
    assert "skipped: needs redis-server" in out.getvalue()
    assert "Traceback" in errors.getvalue() and "needs redis-server" not in errors.getvalue()


def test_rows_that_cannot_be_drawn_skip_the_phase_but_keep_its_figures() -> None:
    phase = Phase("odd", "Odd", "odd", lambda: {"shape": "unexpected"}, lambda r: [("x", r["missing"])])

    outcome = run_phases([phase], io.StringIO(), io.StringIO())

    assert outcome.results == {"odd": {"shape": "unexpected"}}
    assert outcome.rows == [("Odd: skipped: KeyError: 'missing'",)]


def test_a_phase_calling_sys_exit_ends_only_itself() -> None:
    def exits() -> None:
        raise SystemExit("no .venv-3.13")

    phases = [Phase("exits", "Exits", "exits", exits),
              Phase("after", "After", "after", lambda: 1, lambda _r: [("ran",)])]

    outcome = run_phases(phases, io.StringIO(), io.StringIO())

    assert outcome.rows == [("Exits: skipped: exited: no .venv-3.13",), ("ran",)]


@pytest.fixture
def root_logging() -> Iterator[None]:
    """The bench's main replaces the root logger's handlers (bench.harness.capture_logs): put them back."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_a_full_run_with_a_failing_phase_prints_keeps_and_writes_the_others(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capfd: pytest.CaptureFixture[str], root_logging: None,
) -> None:
    import bench.__main__ as bench_main
    from bench import coldstart, shards

    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\nprose\n\n<!-- bench:results:start -->\nan earlier run\n"
                   "<!-- bench:results:end -->\n")
    monkeypatch.setattr(bench_main, "machine", lambda _servers: {"cpus": "2"})
    monkeypatch.setattr(bench_main, "DOC", doc)
    monkeypatch.setattr(bench_main, "PHASES", ("coldstart", "shards", "schedule"))
    monkeypatch.setattr(coldstart, "run", lambda _samples: _fails())
    monkeypatch.setattr(shards, "run", lambda _jobs, _rounds: _lacks_a_tool())
    monkeypatch.setattr(bench_main, "run_schedule", lambda: "next-fire computation: 0.66 µs\n")

    code = bench_main.main(["--json", str(tmp_path / "results.json")])

    printed = capfd.readouterr().out
    assert code == 1  # a phase failed: the run says so, after printing everything it has
    assert "Cold start: import of each handler module on Python 3.13: skipped: RuntimeError" in printed
    assert "Sharded claiming on a Redis Cluster of 3 primaries: skipped: needs redis-server" in printed
    assert "next-fire computation: 0.66 µs" in printed
    kept = json.loads((tmp_path / "results.json").read_text())
    assert kept["schedule"] == "next-fire computation: 0.66 µs\n"
    assert set(kept["skipped"]) == {"coldstart", "shards"}
    written = doc.read_text()
    assert "prose" in written and "an earlier run" not in written
    assert "| Cold start: import of each handler module on Python 3.13: skipped: RuntimeError" in written
    assert "next-fire computation: 0.66 µs" in written
