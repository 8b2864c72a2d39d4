"""CPU per run of each step of an instant's path: thread CPU timers around named functions, in every process.

With `--profile-steps` (or BENCH_STEPS=1 in the environment, which the executor processes inherit), each process
wraps the functions of STEPS: a call adds the CPU time of its own thread (time.thread_time) to its step, an inner
call of the same step on the same thread not twice. Waiting (for the instant, a socket, a lock) costs no CPU, so a
step's figure is what it costs whatever the machine's load; what runs on other threads (a group's pool, the
recorder) is counted in their own steps. Each process also counts its CPU in all (time.process_time), which takes
in what no step names (threads started, the garbage collector, queues, pickling).

The timers are reset after the warm-up (bench/rig.py), in every executor process too (bench/executors.py sends each
a RESET), and collected when those close; `report` divides by the instant's runs.
A step whose function a tree lacks (an A/B against an older tree) is reported absent. A wrapped call costs about
a microsecond more, a few per run.
"""
from __future__ import annotations

import functools
import importlib
import os
import threading
import time
from collections import defaultdict
from typing import Any, Callable

ENV = "BENCH_STEPS"
RESET = "bench-steps-reset"  # a payload an executor process takes as "reset your timers", not an event
POLLER, EXECUTOR = "poller", "executor"


# (side, label, where the function is looked up when called: "module:Qualified.name"). Indented labels are
# part of the step above them (on the same thread); the others are apart.
STEPS: tuple[tuple[str, str, str], ...] = (
    (POLLER, "tick (the ticking thread)", "tickwork.dispatch.poller:Poller.tick"),
    (POLLER, "  fetch (Lua)", "tickwork.dueindex.shard:Shard.fetch_page"),
    (POLLER, "  plan and claim", "tickwork.dispatch.poller:Poller._claim_batch"),
    (POLLER, "    of which the claim (Lua)", "tickwork.dueindex.shard:Shard.claim"),
    (POLLER, "record (a record thread)", "tickwork.dispatch.recording:Recorder._record"),
    (POLLER, "admission", "tickwork.dispatch.recording:Recorder._admit"),
    (POLLER, "hand-off (group, queue)", "bench.executors:ProcessExecutors.invoke"),
    (EXECUTOR, "invocation thread (handle_event)", "tickwork.runs.executor:handle_event"),
    (EXECUTOR, "  executor made (targets, secrets)", "tickwork.runs.executor:Executor.__post_init__"),
    (EXECUTOR, "  start runs (one statement)", "tickwork.store.executions:start_unguarded_many"),
    (EXECUTOR, "  threads started (a group's pool)", "tickwork.runs.pool:ElasticPool._add_thread"),
    (EXECUTOR, "  signing keys read ahead (one statement)", "tickwork.secrets.outgoing:TenantSecrets.read_ahead"),
    (EXECUTOR, "  pause check (MGET)", "tickwork.runs.executor:Executor.stopped_lately"),
    (EXECUTOR, "  fire (write)", "tickwork.runs.executor:Executor.fire"),
    (EXECUTOR, "decode event", "tickwork.models:dispatches_from_event"),
    (EXECUTOR, "prepare (a group's thread)", "tickwork.runs.executor:Executor.prepare"),
    (EXECUTOR, "  secrets opened, interpolated", "tickwork.secrets.outgoing:TenantSecrets.request_to_send"),
    (EXECUTOR, "  signing keys (read, decrypt)", "tickwork.secrets.outgoing:TenantSecrets.signing_keys"),
    (EXECUTOR, "    of which the statement", "tickwork.store.secrets:signing_secrets"),
    (EXECUTOR, "decryptions (Keyring.open, any thread)", "tickwork.secrets.crypto:Keyring.open"),
    (EXECUTOR, "  render and connect (delivery.prepare)", "tickwork.http.delivery:prepare"),
    (EXECUTOR, "    of which the signature", "tickwork.http.signing:Signing.headers"),
    (EXECUTOR, "    of which the connection (take, render, open)", "tickwork.http.delivery:Prepared.connect"),
    (EXECUTOR, "connect ahead (Executor.connect)", "tickwork.runs.executor:Executor.connect"),
    (EXECUTOR, "read response (Prepared.complete)", "tickwork.http.delivery:Prepared.complete"),
    (EXECUTOR, "record attempts (recorder thread)", "tickwork.runs.executor:Executor.record"),
    (EXECUTOR, "  of which the write (ending.end)", "tickwork.runs.ending:end"),
    (EXECUTOR, "    of which the statement (finish_attempts)", "tickwork.store.attempts:finish_attempts"),
    (EXECUTOR, "  of which the log lines", "tickwork.runs.executor:_log"),
    (EXECUTOR, "  of which the metrics", "tickwork.metrics:record_attempts"),
    (EXECUTOR, "Postgres connection taken (pool)", "psycopg_pool.pool:ConnectionPool.getconn"),
    (EXECUTOR, "Postgres connection given back (pool)", "psycopg_pool.pool:ConnectionPool.putconn"),
    (EXECUTOR, "  its return (pool worker thread)", "psycopg_pool.pool:ConnectionPool._return_connection"),
    (EXECUTOR, "give back places", "tickwork.runs.executor:give_back"),
)
PROCESS = "process CPU, all threads"


def enabled() -> bool:
    return os.environ.get(ENV) == "1"


def enable() -> None:
    """Profile this process and every process it starts from now on."""
    os.environ[ENV] = "1"
    install()


class _Timers:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cpu: defaultdict[str, float] = defaultdict(float)
        self.calls: defaultdict[str, int] = defaultdict(int)
        self.absent: list[str] = []
        self.installed = False
        self.local = threading.local()  # the steps under way on this thread
        self.since = time.process_time()

    def reset(self) -> None:
        with self.lock:
            self.cpu.clear()
            self.calls.clear()
            self.since = time.process_time()

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {"cpu": dict(self.cpu), "calls": dict(self.calls), "absent": list(self.absent),
                    "process": time.process_time() - self.since}

    def wrap(self, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            active = self.local.__dict__.setdefault("active", set())
            if label in active:
                return fn(*args, **kwargs)
            active.add(label)
            began = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent = time.thread_time() - began
                active.discard(label)
                with self.lock:
                    self.cpu[label] += spent
                    self.calls[label] += 1

        timed.__wrapped_step__ = fn  # type: ignore[attr-defined]
        return timed


_timers = _Timers()


def install() -> None:
    """Wrap every step's function this tree has (once per process)."""
    if _timers.installed:
        return
    _timers.installed = True
    for _, label, where in STEPS:
        module_name, _, qualified = where.partition(":")
        try:
            owner: Any = importlib.import_module(module_name)
            *path, name = qualified.split(".")
            for part in path:
                owner = getattr(owner, part)
            fn = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        except (ImportError, AttributeError, KeyError):
            _timers.absent.append(label)
            continue
        setattr(owner, name, _timers.wrap(label, fn))


def reset() -> None:
    _timers.reset()


def snapshot() -> dict[str, Any]:
    return _timers.snapshot()


# ---------------------------------------------------------------- the parent's view

_children: list[dict[str, Any]] = []  # the executor processes' snapshots, as they close


def collect_child(snap: dict[str, Any] | None) -> None:
    if snap is not None:
        _children.append(snap)


def reset_all() -> None:
    """This process's timers, and the snapshots collected from closed children."""
    reset()
    _children.clear()


def report(runs: int) -> dict[str, Any]:
    """Every step's CPU (ms) and calls, over this process (the poller) and the executor processes, per run of `runs`."""
    mine, children = snapshot(), list(_children)
    _children.clear()  # reported: the next run's executor processes report their own
    sides = {POLLER: [mine], EXECUTOR: children or [mine]}
    rows = []
    for side, label, _ in STEPS:
        snaps = sides[side]
        cpu = sum(s["cpu"].get(label, 0.0) for s in snaps)
        calls = sum(s["calls"].get(label, 0) for s in snaps)
        absent = all(label in s["absent"] for s in snaps)
        rows.append({"side": side, "step": label, "absent": absent, "calls": calls,
                     "cpu_ms": round(cpu * 1000, 1), "ms_per_run": round(cpu * 1000 / max(runs, 1), 4)})
    for side, snaps in ((POLLER, [mine]), (EXECUTOR, children)):
        cpu = sum(s["process"] for s in snaps)
        rows.append({"side": side, "step": PROCESS, "absent": not snaps, "calls": len(snaps),
                     "cpu_ms": round(cpu * 1000, 1), "ms_per_run": round(cpu * 1000 / max(runs, 1), 4)})
    return {"runs": runs, "executor_processes": len(children), "steps": rows}


def table(profile: dict[str, Any]) -> str:
    """The report as aligned text: side, step, CPU per run (ms), CPU in all (ms), calls."""
    lines = [f"CPU per step, {profile['runs']:,} runs, {profile['executor_processes']} executor processes"]
    for row in profile["steps"]:
        figures = "absent" if row["absent"] else (
            f"{row['ms_per_run']:8.4f} ms/run {row['cpu_ms']:10.1f} ms {row['calls']:7,} calls")
        lines.append(f"  {row['side']:<8} {row['step']:<48} {figures}")
    return "\n".join(lines)
