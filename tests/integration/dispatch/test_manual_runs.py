"""A manual run that lands exactly on a scheduled slot's instant: both runs are kept, each with its own row
and run id, and the slot is dispatched once (API, poller, real Postgres and Redis)."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from tests.integration.api_client import Api, use_clock
from tickwork.dispatch.poller import Poller
from tickwork.timeutil import parse_rfc3339, to_ms
from tickwork.wiring import Services

SLOT = datetime(2026, 11, 30, 12, 1, 0, tzinfo=timezone.utc)  # a slot of "0 * * * * *"


def _job(api: Api) -> str:
    use_clock((SLOT - timedelta(seconds=30)).timestamp)
    job = api.create(schedule="0 * * * * *", timezone="UTC")
    assert parse_rfc3339(job["next_run_at"]) == SLOT
    return str(job["id"])


def _run_now(api: Api, job_id: str) -> str:
    use_clock(SLOT.timestamp)  # "run now" asked at the slot's very instant
    reply = api.call("POST", f"/jobs/{job_id}/run")
    assert reply.status == 202, reply.body
    assert parse_rfc3339(reply.body["scheduled_for"]) == SLOT
    return str(reply.body["id"])


def _tick(services: Services, at: datetime) -> list[str]:
    """The runs a poller tick at `at` dispatches."""
    services.invoker.dispatches.clear()  # type: ignore[union-attr]
    Poller(services).tick(to_ms(at))
    return [d.execution_id for d in services.invoker.dispatches]  # type: ignore[union-attr]


def _runs_at_the_slot(db: Any, job_id: str) -> dict[str, str]:
    """{trigger: execution id} of the job's runs at SLOT."""
    rows = db.execute("SELECT trigger, id::text FROM executions WHERE job_id = %s AND scheduled_for = %s",
                      (job_id, SLOT)).fetchall()
    assert len(rows) == len({trigger for trigger, _ in rows}), rows
    return dict(rows)


def test_a_manual_run_then_the_slot_at_its_instant_keeps_both(api: Api, services: Services, db: Any) -> None:
    """Break: the slot's row conflicted with the manual run's (job, scheduled_for) and was silently not
    recorded: the slot never ran and left no trace. Must hold: both rows, both dispatched, the slot once."""
    job_id = _job(api)
    manual = _run_now(api, job_id)

    dispatched = _tick(services, SLOT - timedelta(milliseconds=500))

    runs = _runs_at_the_slot(db, job_id)
    assert set(runs) == {"manual", "schedule"}
    assert runs["manual"] == manual and runs["schedule"] != manual
    assert sorted(dispatched) == sorted(runs.values())
    assert _tick(services, SLOT + timedelta(seconds=1)) == []


def test_the_slot_then_a_manual_run_at_its_instant_keeps_both(api: Api, services: Services, db: Any) -> None:
    """Break: the manual run's insert hit the slot's unique (job, scheduled_for) and the API answered 500.
    Must hold: 202, both rows, each run dispatched once."""
    job_id = _job(api)
    (slot,) = _tick(services, SLOT - timedelta(milliseconds=500))

    manual = _run_now(api, job_id)

    assert _runs_at_the_slot(db, job_id) == {"schedule": slot, "manual": manual}
    assert _tick(services, SLOT - timedelta(milliseconds=400)) == [manual]
    assert _tick(services, SLOT + timedelta(seconds=1)) == []
