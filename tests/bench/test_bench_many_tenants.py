"""The many-tenant instants' pure parts (bench/many_tenants.py, bench/top_of_hour.py, bench/phases.py): the tenants'
layout, the target's addresses, the report's maths and the phases' time budget. Timings are not tested."""
from __future__ import annotations

import socket

import pytest

from bench.many_tenants import addresses_for, scheduler_share, tenant_layout
from bench.phases import Deadline, OverBudget
from bench.target import Arrival, Target, loopback_addresses
from bench.top_of_hour import arrival_lags_by_tenant, worst_tenants
from tests.support import wait_for


def test_twenty_tenants_of_500_and_one_of_1000_make_11000_runs_each_tenant_named_once() -> None:
    layout = tenant_layout(20, 500, 1000)
    assert len(layout) == 21 and len({name for name, _ in layout}) == 21
    assert sum(n for _, n in layout) == 11_000
    assert layout[-1] == ("tenant-big", 1000) and {n for _, n in layout[:-1]} == {500}
    assert tenant_layout(100, 1000) == [(f"tenant-{n:03d}", 1000) for n in range(1, 101)]


@pytest.mark.parametrize(("runs", "addresses"), [(1, 1), (11_000, 1), (20_000, 1), (20_001, 2), (100_000, 5)])
def test_an_address_takes_at_most_20000_connections_of_one_instant(runs: int, addresses: int) -> None:
    assert addresses_for(runs) == addresses


def test_the_addresses_are_loopbacks_from_127_0_0_1_and_at_most_254() -> None:
    assert loopback_addresses(3) == ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
    assert loopback_addresses(254)[-1] == "127.0.0.254"
    for wrong in (0, 255):
        with pytest.raises(ValueError):
            loopback_addresses(wrong)


def test_a_target_on_two_addresses_records_what_arrives_at_either() -> None:
    with Target(addresses=2) as target:
        assert [url.split("/")[2].split(":")[0] for url in target.urls] == ["127.0.0.1", "127.0.0.2"]
        assert target.url == target.urls[0]
        for n, url in enumerate(target.urls):
            host, port = url.split("/")[2].split(":")
            with socket.create_connection((host, int(port))) as sock:
                sock.sendall(b"POST /hook HTTP/1.1\r\nTickwork-Run-Id: r%d\r\nContent-Length: 0\r\n\r\n" % n)
                assert sock.recv(100).startswith(b"HTTP/1.1 200 OK")
        assert wait_for(lambda: target.count() == 2)
        assert sorted(a.run_id for a in target.take()) == ["r0", "r1"]


def test_the_schedulers_share_is_said_before_the_instant_or_late() -> None:
    assert scheduler_share(-1.234) == "1.23 s before the instant"
    assert scheduler_share(0.0) == "0.00 s before the instant"
    assert scheduler_share(0.5) == "0.50 s late"
    assert scheduler_share(None) == "nothing handed over"


def test_each_tenants_lags_count_a_runs_first_arrival_only_and_the_latest_tenant_comes_first() -> None:
    instant = 1_000
    arrivals = [
        Arrival(1000.30, "r2", "j2", ""), Arrival(1000.10, "r1", "j1", ""), Arrival(1000.50, "r1", "j1", ""),
        Arrival(1000.02, "r3", "j3", ""), Arrival(1000.90, "rx", "unknown", ""),
    ]
    lags = arrival_lags_by_tenant(arrivals, {"j1": "a", "j2": "a", "j3": "b"}, instant)
    assert {t: [round(ms) for ms in v] for t, v in lags.items()} == {"a": [100, 300], "b": [20]}
    assert worst_tenants(lags) == [{"tenant": "a", "arrived": 2, "max_ms": 300.0},
                                   {"tenant": "b", "arrived": 1, "max_ms": 20.0}]
    assert worst_tenants(lags, count=1)[0]["tenant"] == "a"


def test_a_deadline_bounds_the_waits_left_and_refuses_a_step_once_over() -> None:
    now = [100.0]
    deadline = Deadline(30, clock=lambda: now[0])
    assert deadline.left() == 30 and deadline.bounded(60) == 30 and deadline.bounded(5) == 5
    deadline.check("the instant")
    now[0] = 131.0
    assert deadline.over() and deadline.bounded(60) == 0
    with pytest.raises(OverBudget, match="budget of 30 s before the instant"):
        deadline.check("the instant")
    unbounded = Deadline(None, clock=lambda: now[0])
    assert not unbounded.over() and unbounded.bounded(60) == 60
