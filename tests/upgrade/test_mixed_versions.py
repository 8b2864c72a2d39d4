"""Two releases on one PostgreSQL database and one Redis namespace under every-second load, as a deploy and a
rollback run them: the baseline (tests/upgrade/baseline.py: 0.29.0, commit 26fd9f7, checked out from this
repository's history into a cache with a venv of its own) and this tree, each as its local runtime
(`python -m tickwork_local`, a process of its own) sending to one stock target (tests/upgrade/target.py).

The window, in phases:
  old alone -> the new one starts (its migrations run under the old one's load) -> both, side by side ->
  the old one stopped (SIGTERM: it finishes what it started) -> the new one alone -> the old one started
  again on the new schema (a rollback) -> both -> the new one stopped -> the old one alone.
Throughout, an API driver creates, reads, patches, lists, pauses, resumes and runs jobs by hand through
whichever APIs are up, taking turns (tests/upgrade/driver.py), and the load crosses the releases in every
way they share state: jobs every second (due-index members and specs one release's API wrote, claimed by
either poller), retries (a member one release's executor queued, claimed by the other's poller), runs
failing for good (notifications one release wrote, delivered by either), completion callbacks (a token one
release made, checked by the other's API) and the driver's manual runs.

Checked: every slot of every job in the window arrived once (0 lost, 0 duplicated, by run id at the
target), no API answered a 5xx, the two pollers ticked under one tick lock (no second worked twice, each
ticked while both ran), both runtimes shut down cleanly and logged no error; the lateness p99 of the mixed
phases is printed beside the single-release ones. Marked `upgrade`: `make test-upgrade` (once per CI run).
"""
from __future__ import annotations

import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import psycopg
import pytest
import redis

import tickwork
from tests.conftest import own_database
from tests.integration.helpers import free_port
from tests.upgrade import analysis
from tests.upgrade.analysis import Phase, Run
from tests.upgrade.baseline import ROOT, build
from tests.upgrade.driver import ApiDriver, ApiPool, Call, callback_sender
from tests.upgrade.runtimes import Release, Runtime, runtime_env
from tests.upgrade.target import Arrival, Callback, UpgradeTarget
from tickwork.dueindex.index import DueIndex

pytestmark = pytest.mark.upgrade

LOAD_JOBS = 40  # every second each: 40 runs a second besides the rest
OLD, NEW = "old", "new"
# (phase, seconds it lasts, who runs)
PHASES = (("old alone", 10, {OLD}), ("upgrade: both", 20, {OLD, NEW}), ("new alone", 15, {NEW}),
          ("rollback: both", 20, {OLD, NEW}), ("rolled back: old alone", 10, {OLD}))
# Slots this close to the end of the window may still be on their way (a retry, a callback) when it ends.
SETTLE_SECONDS = 4
TOKEN = "tw_upgrade_" + "k" * 32


@dataclass
class Window:
    """What happened, for the tests below to judge."""

    baseline_commit: str
    releases: dict[str, Release]
    runtimes: dict[str, Runtime]
    phases: list[Phase]
    first: int  # the window's first and last slot seconds
    last: int
    jobs: dict[str, list[str]]  # kind -> job ids
    arrivals: list[Arrival]
    callbacks: list[Callback]
    calls: list[Call]
    manual_runs: list[str]
    runs: dict[str, Run]
    notifications: dict[str, str]  # notification id -> execution id
    exits: dict[str, list[int]] = field(default_factory=dict)
    unknown_member_left: bool | None = None
    driver_errors: list[BaseException] = field(default_factory=list)


@pytest.fixture(scope="module")
def database(servers: Any) -> Iterator[str]:
    with own_database(servers.database_url, "tw_mixed") as url:
        yield url


@pytest.fixture(scope="module")
def window(servers: Any, database: str, tmp_path_factory: pytest.TempPathFactory,
           request: pytest.FixtureRequest) -> Iterator[Window]:
    baseline = build()
    releases = {OLD: Release(baseline.label, baseline.python, baseline.source),
                NEW: Release(f"{tickwork.__version__} (this tree)", Path(sys.executable), ROOT)}
    home = tmp_path_factory.mktemp("upgrade")
    namespace = f"tickwork-upgrade-{uuid.uuid4().hex[:8]}"
    runtimes = {}
    for name, release in releases.items():
        port = free_port()
        env = runtime_env(database, servers.redis_url, namespace, TOKEN, home / "master.key", home / name, port)
        runtimes[name] = Runtime(release, port, env, home / "logs")
    pool = ApiPool(TOKEN)
    target = UpgradeTarget(callback_sender(pool))
    try:
        ran = _run_window(baseline.commit, releases, runtimes, pool, target, database, servers.redis_url, namespace)
        # In the output whatever the checks find (pytest shows a test's own prints only when it fails).
        with request.config.pluginmanager.get_plugin("capturemanager").global_and_fixture_disabled():
            print("\n" + "\n".join(_report(ran)), flush=True)
        yield ran
    finally:
        target.close()
        for runtime in runtimes.values():
            if runtime.process is not None and runtime.process.poll() is None:
                runtime.stop()
        client = redis.Redis.from_url(servers.redis_url)
        keys = list(client.scan_iter(match="{" + namespace + "[}/]*"))
        if keys:
            client.delete(*keys)
        client.close()


def _run_window(commit: str, releases: dict[str, Release], runtimes: dict[str, Runtime], pool: ApiPool,
                target: UpgradeTarget, database: str, redis_url: str, namespace: str) -> Window:
    old, new = runtimes[OLD], runtimes[NEW]
    exits: dict[str, list[int]] = {OLD: [], NEW: []}
    old.start()
    pool.add(OLD, old.url)
    jobs = _create_load(pool, target.url)
    driver = ApiDriver(pool, target.url)
    driver.start()
    first = int(time.time()) + 2
    phases = [Phase(PHASES[0][0], first, False)]
    _until(first + PHASES[0][1])

    new.start()  # applies this tree's migrations while the old one runs
    pool.add(NEW, new.url)
    phases.append(Phase(PHASES[1][0], time.time(), True))
    _until(phases[-1].begins + PHASES[1][1])

    pool.remove(OLD)
    exits[OLD].append(old.stop())
    phases.append(Phase(PHASES[2][0], time.time(), False))
    probe = _unknown_member(redis_url, namespace)
    _until(phases[-1].begins + PHASES[2][1])
    left = probe.left_alone()

    old.start()  # the rollback: the old release on the new schema
    pool.add(OLD, old.url)
    phases.append(Phase(PHASES[3][0], time.time(), True))
    _until(phases[-1].begins + PHASES[3][1])

    pool.remove(NEW)
    exits[NEW].append(new.stop())
    phases.append(Phase(PHASES[4][0], time.time(), False))
    _until(phases[-1].begins + PHASES[4][1])

    driver.stop()
    last = int(time.time()) - SETTLE_SECONDS
    time.sleep(SETTLE_SECONDS)  # what is under way (retries, callbacks, notifications) arrives
    pool.remove(OLD)
    exits[OLD].append(old.stop())
    runs, notifications = _stored(database)
    return Window(commit, releases, runtimes, phases, first, last, jobs, list(target.arrivals), list(target.callbacks),
                  list(driver.calls), list(driver.manual_runs), runs, notifications, exits, left, driver.errors)


def _until(wall: float) -> None:
    time.sleep(max(0.0, wall - time.time()))


def _create_load(pool: ApiPool, target: str) -> dict[str, list[str]]:
    """The jobs of the window (through the old release's API, before the new one exists): each kind crosses
    the releases in its own way."""
    specs = [("load", "* * * * * *", {}) for _ in range(LOAD_JOBS)] + [
        ("flaky", "*/2 * * * * *", {"retry": {"strategy": "fixed", "max_attempts": 2, "delay_seconds": 1,
                                              "jitter": "none"}}),
        ("doomed", "*/5 * * * * *", {"retry": {"max_attempts": 1}, "notify": {"url": f"{target}/notify/doomed",
                                                                             "on": ["failure"]}}),
        ("callback", "*/2 * * * * *", {"completion": {"mode": "callback", "timeout_seconds": 120}})]
    jobs: dict[str, list[str]] = {}
    for number, (kind, schedule, extra) in enumerate(specs):
        body = {"name": f"{kind}-{number}", "schedule": schedule,
                "request": {"method": "POST", "url": f"{target}/{kind}/{number}", "body": "{}"}, **extra}
        _, status, job = pool.request("POST", "/jobs", body)
        assert status == 201, job
        jobs.setdefault(kind, []).append(job["id"])
    return jobs


class _unknown_member:
    """A due-index member of a kind no release knows, put in while the new release runs alone: the new
    release leaves unknown kinds alone (issue 31, item 1). Taken out before the rollback (the old release
    treats any member that is not a job as a run: the reason no release may write a new kind while it runs)."""

    def __init__(self, redis_url: str, namespace: str) -> None:
        self.client = redis.Redis.from_url(redis_url, decode_responses=True)
        self.key = DueIndex(self.client, namespace).due_key
        self.member = f"x:{uuid.uuid4()}:1"
        self.client.zadd(self.key, {self.member: int(time.time() * 1000) - 1000})

    def left_alone(self) -> bool:
        left = self.client.zscore(self.key, self.member) is not None
        self.client.zrem(self.key, self.member)
        self.client.close()
        return left


def _stored(database: str) -> tuple[dict[str, Run], dict[str, str]]:
    with psycopg.connect(database) as conn:
        runs = {str(row[0]): Run(str(row[0]), str(row[1]), row[2], row[3], row[4]) for row in conn.execute(
            "SELECT id, job_id, scheduled_for, trigger, status FROM executions")}
        notifications = {str(n): str(e) for n, e in conn.execute("SELECT id, execution_id FROM notifications")}
    return runs, notifications


# ---------------------------------------------------------------- the checks

def test_every_slot_of_the_window_arrived_once(window: Window) -> None:
    every = {"load": 1, "flaky": 2, "doomed": 5, "callback": 2}
    attempts = {"flaky": (1, 2)}
    lost: dict[str, int] = {}
    for kind, step in every.items():
        arrivals = [a for a in window.arrivals if a.kind == kind]
        found = analysis.delivery(analysis.slots(window.jobs[kind], window.first, window.last, step), arrivals,
                                  window.runs, attempts.get(kind, (1,)))
        assert found.expected, kind
        lost[kind] = len(found.lost)
        assert not found.lost, f"{kind}: {len(found.lost)} of {len(found.expected)} slots lost: {found.lost[:10]}"
        assert not found.duplicated and not found.extra_runs, (kind, found.duplicated[:10], found.extra_runs[:10])


def test_every_manual_run_and_notification_arrived_once(window: Window) -> None:
    driver_runs = Counter(a.run_id for a in window.arrivals if a.kind == "load" and a.path.startswith("/load/driver-"))
    assert window.manual_runs and all(driver_runs[run] == 1 for run in window.manual_runs), {
        run: (driver_runs[run], window.runs[run]) for run in window.manual_runs if driver_runs[run] != 1}
    # Each doomed run of the window failed for good once, and its run.failed event arrived once.
    notified = Counter(window.notifications.get(a.run_id) for a in window.arrivals if a.kind == "notify")
    doomed = [run.id for run in window.runs.values() if run.job_id in window.jobs["doomed"]
              and window.first <= run.scheduled_for.timestamp() <= window.last]
    assert doomed and all(notified[run] == 1 for run in doomed), {run: notified[run] for run in doomed}


def test_callbacks_made_by_one_release_complete_runs_through_the_other(window: Window) -> None:
    calls = [c for c in window.callbacks
             if window.first <= window.runs[c.run_id].scheduled_for.timestamp() <= window.last]
    assert calls and {c.status for c in calls} == {200}, Counter((c.via, c.status) for c in calls)
    crossed = {c.via for c in calls}
    assert crossed == {OLD, NEW}
    unfinished = [run for run in window.runs.values() if run.job_id in window.jobs["callback"]
                  and window.first <= run.scheduled_for.timestamp() <= window.last and run.status != "succeeded"]
    assert not unfinished, unfinished[:5]


def test_no_api_answered_a_5xx_and_each_answered_as_documented(window: Window) -> None:
    assert not window.driver_errors, window.driver_errors
    assert not [c for c in window.calls if c.status >= 500]
    assert [c for c in window.calls if not c.ok] == []
    per_api = Counter(c.via for c in window.calls)
    assert per_api[OLD] > 20 and per_api[NEW] > 20, per_api


def test_both_pollers_ticked_under_one_tick_lock(window: Window) -> None:
    ticks = {name: runtime.working_ticks() for name, runtime in window.runtimes.items()}
    per_second = analysis.ticks_per_second(ticks, window.first, window.last)
    assert [s for s, who in per_second.items() if len(who) > 1] == [], "a second worked by two pollers"
    for phase, until in zip(window.phases, [p.begins for p in window.phases[1:]] + [window.last]):
        who = {name for second, names in per_second.items() if phase.begins <= second < until for name in names}
        if phase.mixed:
            assert who == {OLD, NEW}, (phase.name, who)


def test_both_releases_stopped_cleanly_and_logged_no_error(window: Window) -> None:
    assert window.exits == {OLD: [0, 0], NEW: [0]}
    assert {name: runtime.errors() for name, runtime in window.runtimes.items()} == {OLD: [], NEW: []}


def test_the_new_release_leaves_a_member_of_an_unknown_kind_alone(window: Window) -> None:
    assert window.unknown_member_left is True


def _report(window: Window) -> list[str]:
    """The window's figures: the releases, what was lost and duplicated, the lateness per phase."""
    load = analysis.delivery(analysis.slots(window.jobs["load"], window.first, window.last), [
        a for a in window.arrivals if a.kind == "load"], window.runs)
    lateness = load.lateness
    per_phase = analysis.by_phase(lateness, window.phases, window.last + 1)
    mixed = [late for phase in window.phases if phase.mixed for late in per_phase[phase.name]]
    single = [late for phase in window.phases if not phase.mixed for late in per_phase[phase.name]]
    lines = [f"baseline: {window.releases[OLD].label}, commit {window.baseline_commit}, "
             f"beside {window.releases[NEW].label}",
             f"window: {window.last - window.first + 1} s, {len(load.expected)} load slots: {len(load.lost)} lost, "
             f"{len(load.duplicated) + len(load.extra_runs)} duplicated (flaky, doomed and callback jobs: see the "
             f"checks); API calls {len(window.calls)}, of them 5xx {sum(c.status >= 500 for c in window.calls)}; "
             f"manual runs {len(window.manual_runs)}"]
    for phase in window.phases:
        values = per_phase[phase.name]
        lines.append(f"  {phase.name:24} slots {len(values):5}  lateness p50 {_ms(values, 0.5)}  "
                     f"p99 {_ms(values, 0.99)}  max {_ms(values, 1.0)}")
    lines.append(f"  {'mixed phases':24} slots {len(mixed):5}  p99 {_ms(mixed, 0.99)}   single-release phases "
                 f"slots {len(single)}  p99 {_ms(single, 0.99)}")
    return lines


def _ms(values: list[float], share: float) -> str:
    return f"{analysis.percentile(values, share) * 1000:6.0f} ms"
