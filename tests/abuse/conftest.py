"""The hostile-tenant suite: black-box requests through the local API Gateway, sent with a second tenant's key as
an attacker would send them, while a benign tenant's every-second job runs on the same runtime.

Each test asserts the safe answer, and that the benign job kept its lateness meanwhile (`Arena.assert_benign_on_time`):
every second of the window sent once, none later than BENIGN_LATE_SECONDS. One runtime serves the whole module (its
own schema and key namespace), so the benign job's history is one continuous record across the module's attacks.
"""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterator

import psycopg
import pytest

from tests.conftest import Target, _with_search_path
from tests.support import wait_for
from tickwork.tenant.operator import create_tenant_with_key
from tickwork.settings import Settings
from tickwork.store.migrate import migrate
from tickwork.timeutil import parse_rfc3339
from tickwork_local.runtime import LocalRuntime

# The product's promise: a run is sent within a second of its slot (docs/benchmarks.md: milliseconds when idle).
BENIGN_LATE_SECONDS = 1.0
BENIGN_PATH = "/benign"
# How long after a window's end its last slots may still be arriving (sent ahead, answered at once).
SETTLE_SECONDS = 2.5


@dataclass
class Lateness:
    slots: int
    missing: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    late: list[tuple[str, float]] = field(default_factory=list)
    worst: float = 0.0

    def __str__(self) -> str:
        return (f"{self.slots} slots, worst {self.worst * 1000:.0f} ms, missing {self.missing[:5]}, "
                f"duplicated {self.duplicated[:5]}, late {self.late[:5]}")


@dataclass
class Arena:
    runtime: LocalRuntime
    target: Target
    benign_key: str
    benign_job: dict[str, Any]
    hostile_key: str
    hostile_tenant: str

    @property
    def url(self) -> str:
        return self.runtime.api_url

    def hostile(self, method: str, path: str, body: Any = None, **kwargs: Any) -> tuple[int, Any]:
        return call(self.url, method, path, self.hostile_key, body, **kwargs)

    def benign(self, method: str, path: str, body: Any = None, **kwargs: Any) -> tuple[int, Any]:
        return call(self.url, method, path, self.benign_key, body, **kwargs)

    def benign_lateness(self, since: float, until: float) -> Lateness:
        """The benign job's slots in [since, until] (whole seconds, epoch) as the target received them."""
        seen: dict[str, list[float]] = {}
        for request in list(self.target.requests):
            if request["path"] != BENIGN_PATH:
                continue
            slot = request["headers"].get("Tickwork-Scheduled-For", "")
            seen.setdefault(slot, []).append(request["at"] - parse_rfc3339(slot).timestamp())
        report = Lateness(0)
        for second in range(int(since) + 1, int(until) + 1):
            slot = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))
            report.slots += 1
            lags = seen.get(slot) or seen.get(slot.replace("Z", ".000Z"))
            if not lags:
                report.missing.append(slot)
                continue
            if len(lags) > 1:
                report.duplicated.append(slot)
            report.worst = max(report.worst, lags[0])
            if lags[0] > BENIGN_LATE_SECONDS:
                report.late.append((slot, round(lags[0], 3)))
        return report

    def assert_benign_on_time(self, since: float, until: float | None = None) -> Lateness:
        """Every benign slot from `since` to `until` (default: now, and at least 2 s after `since`) sent once and
        on time."""
        until = max(time.time() if until is None else until, since + 2.0)
        time.sleep(max(0.0, until + SETTLE_SECONDS - time.time()))
        report = self.benign_lateness(since, until)
        assert report.slots >= 1
        assert not report.missing and not report.duplicated and not report.late, str(report)
        print(f"benign job over {until - since:.1f} s: {report}")
        return report


def call(base: str, method: str, path: str, key: str | None, body: Any = None, raw: bytes | None = None,
         headers: dict[str, str] | None = None, timeout: float = 30.0) -> tuple[int, Any]:
    """One request through the local API Gateway; (status, JSON answer or the raw text when not JSON)."""
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    sent = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {}),
            **(headers or {})}
    request = urllib.request.Request(base + path, method=method, data=data, headers=sent)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, text = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, text = error.code, error.read()
    try:
        return status, json.loads(text or b"null")
    except ValueError:
        return status, text.decode(errors="replace")


@pytest.fixture(scope="module")
def arena_settings(servers: Any, key_file: Any) -> Iterator[Settings]:
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(servers.database_url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    url = _with_search_path(servers.database_url, schema)
    with psycopg.connect(url, autocommit=True) as conn:
        migrate(conn)
    namespace = f"tickwork-abuse-{uuid.uuid4().hex[:12]}"
    yield Settings(database_url=url, redis_url=servers.redis_url, namespace=namespace,
                   allow_private_targets=True, key_file=str(key_file))
    import redis

    client = redis.Redis.from_url(servers.redis_url)
    keys = list(client.scan_iter(match="{" + namespace + "[}/]*"))
    if keys:
        client.delete(*keys)
    client.close()
    with psycopg.connect(servers.database_url, autocommit=True) as admin:
        admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture(scope="module")
def arena(arena_settings: Settings) -> Iterator[Arena]:
    target = Target()
    runtime = LocalRuntime(arena_settings, port=0)
    runtime.start()
    try:
        assert runtime._services is not None
        hostile = create_tenant_with_key(runtime._services.db, f"hostile-{uuid.uuid4().hex[:6]}")
        status, job = call(runtime.api_url, "POST", "/jobs", runtime.api_key, {
            "name": "benign-every-second", "schedule": "* * * * * *",
            "request": {"method": "POST", "url": target.url + BENIGN_PATH, "body": "{}"}})
        assert status == 201, job
        arena = Arena(runtime, target, runtime.api_key, job, hostile["api_key"], hostile["tenant_id"])
        assert wait_for(lambda: len(arena.benign_lateness(time.time() - 4, time.time() - 2).missing) == 0,
                        timeout=20, interval=0.5), "the benign job never ran on time before the attacks"
        yield arena
    finally:
        runtime.stop()
        target.close()
