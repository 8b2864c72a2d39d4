"""One bad row or one failing step never stops the maintenance pass for everyone else (STYLE 13)."""
from __future__ import annotations

from datetime import timedelta

import pytest
from psycopg.types.json import Jsonb

from tests.integration.ops.test_maintenance import NOW, insert_execution, later_job, set_job, status_of
from tickwork.ops import maintenance
from tickwork.ops.maintenance import MaintenanceStepsFailed, handle_maintenance, run_maintenance
from tickwork.store.tenants import create_tenant
from tickwork.wiring import Services

LOST_SINCE = NOW - timedelta(seconds=66)  # request timeout 5 s + margin 60 s


def test_an_attempt_that_cannot_be_judged_is_left_running_and_the_others_are_ended(services: Services) -> None:
    with services.db.connection() as conn:
        other = create_tenant(conn, "other")
    good = later_job(services, retry={"strategy": "fixed", "max_attempts": 3, "delay_seconds": 7})
    bad = later_job(services, tenant_id=other)
    set_job(services, bad, request=Jsonb("not a request"))  # what no release writes: judging it raises
    good_run = insert_execution(services, good, status="running", attempt_count=1, attempt_started_at=LOST_SINCE)
    bad_run = insert_execution(services, bad, status="running", attempt_count=1, attempt_started_at=LOST_SINCE)
    old_run = insert_execution(services, good, status="succeeded", created_at=NOW - timedelta(days=31))

    report = run_maintenance(services, NOW)

    assert (report.retried, report.lost, report.unjudged, report.failed_steps) == (1, 0, 1, [])
    assert status_of(services, good_run) == ("retrying", 1, NOW + timedelta(seconds=7))
    assert status_of(services, bad_run)[0] == "running"
    assert report.pruned == 1 and status_of(services, old_run) is None


def test_a_failing_step_is_named_and_the_steps_after_it_still_run(
    services: Services, monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the notifications table is unreadable")

    monkeypatch.setattr(maintenance.sweep, "sweep", broken)
    job = later_job(services)
    old_run = insert_execution(services, job, status="succeeded", created_at=NOW - timedelta(days=31))

    report = run_maintenance(services, NOW)

    assert report.failed_steps == ["notifications"]
    assert report.pruned == 1 and status_of(services, old_run) is None
    # The invocation still fails once the pass is done, so the poller function's Errors alarm sees it.
    with pytest.raises(MaintenanceStepsFailed, match="notifications"):
        handle_maintenance(services, NOW.timestamp)
