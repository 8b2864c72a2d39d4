"""The benchmarks' own set-up against the real stores: `make bench` is not in the suite, so what every
benchmark shares is checked here (a full run once broke on tenant names being unique, migration 0004)."""
from __future__ import annotations

import http.client
import os
from urllib.parse import urlsplit

import pytest

from bench.harness import ONCE_A_DAY, Servers, Workspace, create_jobs, insert_jobs, parse_when
from bench.target import Target

pytestmark = pytest.mark.skipif(not (os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL")),
                                reason="the benchmarks run against DATABASE_URL / REDIS_URL only")


def test_a_workspace_takes_jobs_in_several_batches_for_one_tenant() -> None:
    servers = Servers(os.environ["DATABASE_URL"], os.environ["REDIS_URL"])
    with Workspace(servers, "harness") as ws:
        first = create_jobs(ws, 3, ONCE_A_DAY, 1_900_000_000_000, "http://127.0.0.1:9/", "warmup")
        second = insert_jobs(ws, 2, ONCE_A_DAY, 1_900_000_000_000, "http://127.0.0.1:9/", "bench")
        with ws.connect() as conn:
            tenants = conn.execute("SELECT DISTINCT tenant_id FROM jobs").fetchall()
            indexed = ws.redis.zcard("{" + ws.namespace + "}:due")
    assert len(first) == 3 and len(second) == 2 and len(tenants) == 1
    assert indexed == 3  # create_jobs indexes, insert_jobs only writes Postgres


@pytest.mark.parametrize("closing", [False, True])
def test_the_target_keeps_connections_or_closes_each_after_its_answer(closing: bool) -> None:
    with Target(nice=0, close_after_answer=closing) as target:
        url = urlsplit(target.url)
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=5)
        answers = []
        for run in ("run-1", "run-2"):
            conn.request("POST", url.path, body=b"{}", headers={"Tickwork-Run-Id": run})
            response = conn.getresponse()
            answers.append((response.status, response.read(), response.getheader("Connection")))
        conn.close()
        arrived = [a.run_id for a in target.take()]
        accepted = target.connections()
    assert answers == [(200, b"ok", "close" if closing else None)] * 2
    assert arrived == ["run-1", "run-2"]
    assert accepted == (2 if closing else 1)  # http.client opens a new connection after `Connection: close`


def test_the_idle_timeout_target_closes_a_connection_that_brings_nothing() -> None:
    """A fresh connection that sends nothing for its idle timeout, and a kept one after its answer, are
    closed by the target, as a server's header and keep-alive timeouts do."""
    import socket
    import time

    with Target(nice=0, idle_timeout=0.3) as target:
        url = urlsplit(target.url)
        with socket.create_connection((url.hostname, url.port), timeout=5) as fresh:
            began = time.monotonic()
            assert fresh.recv(1) == b""  # closed by the target
            assert 0.25 < time.monotonic() - began < 3
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=5)
        conn.request("POST", url.path, body=b"{}", headers={"Tickwork-Run-Id": "run-1"})
        assert conn.getresponse().read() == b"ok"
        assert conn.sock is not None and conn.sock.recv(1) == b""  # the kept connection is closed too
        conn.close()


def test_tenants_and_jobs_are_made_through_the_api_handler_and_its_clock_can_be_set_back() -> None:
    """bench/tenants.py: the admin event makes each tenant, the API handler their jobs (refusals answered
    as a client sees them), and `set_back` moves the API's `now` (the noisy phase's catch-up backlog)."""
    import time

    from bench.tenants import InProcessApi

    servers = Servers(os.environ["DATABASE_URL"], os.environ["REDIS_URL"])
    job = {"name": "j", "schedule": "* * * * * *", "request": {"url": "http://127.0.0.1:9/hook"}}
    with Workspace(servers, "tenants") as ws:
        api = InProcessApi(ws.services(db_pool_size=2))
        started = time.time()
        try:
            a, b = api.create_tenant("tenant-a"), api.create_tenant("tenant-b")
            made = api.require(a, "POST", "/jobs", job)
            with api.set_back(600):
                late = api.require(b, "POST", "/jobs", {**job, "catchup": "all"})
            refused = api.call(a, "POST", "/jobs", {**job, "schedule": "every blue moon"})
            listed = api.require(b, "GET", "/jobs")
        finally:
            api.close()
    now = time.time()
    assert a != b and refused.status == 400 and refused.body["error"]["field"] == "schedule"
    assert [j["id"] for j in listed["items"]] == [late["id"]]  # each tenant sees its own jobs only
    assert started < parse_when(made["next_run_at"]) <= now + 1  # the next whole second
    assert started - 600 < parse_when(late["next_run_at"]) <= now - 599  # its slots since are all due
