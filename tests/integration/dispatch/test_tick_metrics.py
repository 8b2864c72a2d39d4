"""The tick handler's CloudWatch figures the dashboard and the no-tick alarm rely on, on real Postgres and
Redis: Ticks (one per tick that held the lock) and DueBacklog (what a tick left already due)."""
from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

import pytest

from tests.integration.helpers import due_index, insert_job
from tests.support import hold_tick_lock, mark_built
from tickwork import metrics
from tickwork.dispatch import poller
from tickwork.dispatch.poller import handle_tick
from tickwork.timeutil import to_ms
from tickwork.wiring import Services, build_services

T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)


def _emitted(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    (line,) = [json.loads(x) for x in capsys.readouterr().out.splitlines() if '"_aws"' in x]
    return line


@pytest.fixture
def emf(monkeypatch: pytest.MonkeyPatch) -> None:
    metrics.flush()
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")


def test_a_tick_that_keeps_up_counts_one_tick_and_a_zero_backlog(
    services: Services, invoker, emf, capsys,
) -> None:
    insert_job(services, schedule="* * * * *", next_run_at=T0)
    mark_built(due_index(services), to_ms(T0))
    answer = handle_tick(services, lambda: to_ms(T0) / 1000)
    line = _emitted(capsys)
    directive = line["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == "Tickwork" and directive["Dimensions"] == [["service"]]
    assert line["service"] == metrics.SERVICE
    assert (line["Ticks"], line["DueBacklog"], line["Dispatched"]) == ([1.0], [0.0], [1.0])
    assert answer["due_backlog"] == 0 and answer["dispatched"] == 1
    assert {m["Name"] for m in directive["Metrics"]} <= metrics.NAMES


def test_a_tick_cut_short_reports_what_it_left_due(
    services: Services, invoker, emf, capsys, monkeypatch: pytest.MonkeyPatch,
) -> None:
    for _ in range(5):
        insert_job(services, schedule="* * * * *", next_run_at=T0)
    mark_built(due_index(services), to_ms(T0))
    monkeypatch.setattr(poller, "MAX_BATCHES_PER_TICK", 1)
    small = build_services(replace(services.settings, batch_size=2), invoker=invoker)
    try:
        answer = handle_tick(small, lambda: to_ms(T0) / 1000)
    finally:
        small.close()
    line = _emitted(capsys)
    assert answer["dispatched"] == 2 and answer["due_backlog"] == 3
    assert (line["Ticks"], line["DueBacklog"]) == ([1.0], [3.0])


def test_a_tick_that_found_another_poller_ticking_is_not_counted(
    services: Services, invoker, emf, capsys,
) -> None:
    insert_job(services, schedule="* * * * *", next_run_at=T0)
    index = due_index(services)
    mark_built(index, to_ms(T0))
    assert hold_tick_lock(index, "someone-else", 60_000)
    answer = handle_tick(services, lambda: to_ms(T0) / 1000)
    assert answer["locked"] is False and answer["due_backlog"] is None
    # Nothing recorded: the other poller's tick is the one that counts.
    assert '"_aws"' not in capsys.readouterr().out
