"""A job that ends after `max_runs` scheduled runs, and one deleted once its last run ended (`end_action`):
the API, the poller and the executor against real Postgres, Redis and an HTTP target, every clock pinned."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from tests.conftest import Target
from tests.integration.api_client import Api, job_body, use_clock, use_settings
from tests.integration.helpers import executor_at, insert_job
from tests.support import FakeClock, score_of
from tickwork.dispatch.poller import Poller
from tickwork.models import Dispatch
from tickwork.ops.maintenance import run_maintenance
from tickwork.store import executions as executions_store
from tickwork.timeutil import to_ms
from tickwork.wiring import Services

T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)
NO_RETRY = {"strategy": "fixed", "max_attempts": 1, "delay_seconds": 1}


def _job(api: Api, services: Services, target: Target, **fields: Any) -> str:
    use_settings(services, allow_private_targets=True)  # the target listens on loopback
    use_clock((T0 - timedelta(seconds=1)).timestamp)
    job = api.create(schedule="* * * * * *", timezone="UTC", request={"url": target.url + "/hook"}, **fields)
    return str(job["id"])


def _tick(services: Services, at: datetime) -> list[Dispatch]:
    services.invoker.dispatches.clear()  # type: ignore[union-attr]
    Poller(services).tick(to_ms(at))
    return list(services.invoker.dispatches)  # type: ignore[union-attr]


def _run(services: Services, dispatch: Dispatch) -> list[str]:
    at = datetime.fromtimestamp(dispatch.fire_at_ms / 1000, timezone.utc)
    return executor_at(services, FakeClock(at)).run([dispatch])


def _job_row(db: Any, job_id: str) -> tuple[Any, ...]:
    return db.execute("SELECT status, runs_sent, next_run_at FROM jobs WHERE id = %s", (job_id,)).fetchone()


def _runs(db: Any, job_id: str) -> list[tuple[Any, ...]]:
    return db.execute("SELECT trigger, status FROM executions WHERE job_id = %s ORDER BY scheduled_for, trigger",
                      (job_id,)).fetchall()


def _send_scheduled(services: Services, seconds: range) -> list[Dispatch]:
    """Tick at each second of `seconds` after T0; every dispatch handed over."""
    return [d for s in seconds for d in _tick(services, T0 + timedelta(seconds=s))]


def test_max_runs_sends_that_many_scheduled_runs_and_completes_after_the_last_ends(
        api: Api, services: Services, target: Target, db: Any) -> None:
    """Break: runs_sent not counted or not checked, so a 4th slot is claimed, or the job completes at the 3rd
    claim rather than at its end. Must hold: 3 runs, active until the 3rd ends, then completed, runs kept."""
    job_id = _job(api, services, target, max_runs=3, retry=NO_RETRY)
    sent = _send_scheduled(services, range(0, 3))
    assert len(sent) == 3
    assert _job_row(db, job_id) == ("active", 3, None)
    assert _send_scheduled(services, range(3, 6)) == []  # the 4th slot and later: not claimed
    for dispatch in sent[:2]:
        assert _run(services, dispatch) == ["succeeded"]
    assert _job_row(db, job_id)[0] == "active"  # the 3rd has not ended
    assert _run(services, sent[2]) == ["succeeded"]
    assert _job_row(db, job_id) == ("completed", 3, None)
    assert _runs(db, job_id) == [("schedule", "succeeded")] * 3
    assert api.call("GET", f"/jobs/{job_id}").body["status"] == "completed"


def test_a_retried_last_run_completes_the_job_only_after_its_last_attempt(
        api: Api, services: Services, target: Target, db: Any) -> None:
    job_id = _job(api, services, target, max_runs=1, retry={"strategy": "fixed", "max_attempts": 2, "delay_seconds": 1})
    (first,) = _send_scheduled(services, range(0, 1))
    target.statuses = [503]
    assert _run(services, first) == ["retrying"]
    assert _job_row(db, job_id)[0] == "active"
    assert _run(services, Dispatch(first.execution_id, 2, first.fire_at_ms + 1000)) == ["succeeded"]
    assert _job_row(db, job_id)[0] == "completed"


def test_manual_runs_do_not_count(api: Api, services: Services, target: Target, db: Any) -> None:
    job_id = _job(api, services, target, max_runs=2, retry=NO_RETRY)
    use_clock(T0.timestamp)
    assert api.call("POST", f"/jobs/{job_id}/run").status == 202
    sent = _send_scheduled(services, range(0, 4))
    assert len(sent) == 3  # the manual run and two scheduled ones
    for dispatch in sent:
        assert _run(services, dispatch) == ["succeeded"]
    assert _job_row(db, job_id) == ("completed", 2, None)
    assert sorted(_runs(db, job_id)) == [("manual", "succeeded")] + [("schedule", "succeeded")] * 2


def test_end_action_delete_deletes_the_job_once_its_last_run_ended_and_keeps_its_runs(
        api: Api, services: Services, target: Target, db: Any) -> None:
    job_id = _job(api, services, target, max_runs=2, end_action="delete", retry=NO_RETRY)
    sent = _send_scheduled(services, range(0, 3))
    assert len(sent) == 2
    assert _run(services, sent[0]) == ["succeeded"]
    assert _job_row(db, job_id)[0] == "active"
    assert _run(services, sent[1]) == ["succeeded"]
    assert _job_row(db, job_id)[0] == "deleted"
    assert _runs(db, job_id) == [("schedule", "succeeded")] * 2
    assert api.call("GET", f"/jobs/{job_id}").status == 404


def test_end_action_delete_deletes_a_job_whose_end_at_passed(
        api: Api, services: Services, target: Target, db: Any) -> None:
    job_id = _job(api, services, target, end_at="2026-11-30T12:00:02Z", end_action="delete", retry=NO_RETRY)
    sent = _send_scheduled(services, range(0, 3))
    assert len(sent) == 2
    assert _job_row(db, job_id)[0] == "completed"  # its schedule is over; its last run has not ended
    for dispatch in sent:
        assert _run(services, dispatch) == ["succeeded"]
    assert _job_row(db, job_id)[0] == "deleted"


@pytest.mark.parametrize(("field", "value"), [("max_runs", 0), ("max_runs", "3"), ("max_runs", 1.5),
                                              ("end_action", "archive")])
def test_a_bad_value_is_a_400_naming_the_field(api: Api, field: str, value: Any) -> None:
    reply = api.call("POST", "/jobs", job_body(**{field: value}))
    assert reply.status == 400, reply.body
    assert field in str(reply.body)


def test_a_new_schedule_counts_max_runs_afresh(api: Api, services: Services, target: Target, db: Any) -> None:
    """Break: runs_sent kept across a new schedule, so the job is active again but no slot is ever recorded."""
    job_id = _job(api, services, target, max_runs=1, retry=NO_RETRY)
    (first,) = _send_scheduled(services, range(0, 2))
    assert _run(services, first) == ["succeeded"]
    assert _job_row(db, job_id)[0] == "completed"
    use_clock((T0 + timedelta(seconds=5)).timestamp)
    assert api.call("PATCH", f"/jobs/{job_id}", {"schedule": "*/2 * * * * *"}).status == 200
    assert _job_row(db, job_id)[:2] == ("active", 0)
    assert len(_send_scheduled(services, range(6, 12))) == 1


def test_a_late_claim_revived_after_a_later_one_counts_and_never_sends_past_max_runs(services: Services) -> None:
    """Break: two ticks overlap on a job with max_runs=1: tick B records T0+1s first (T0 accounted lost, the
    one run counted, no next slot), then tick A's late record of T0 revives that lost row without counting it.
    Must hold: the job sends one scheduled run, runs_sent stays 1; with max_runs=2 the revival is counted in
    the statement that revives it and leaves the job without a next slot."""
    second = timedelta(seconds=1)
    one = insert_job(services, schedule="* * * * * *", next_run_at=T0)
    two = insert_job(services, schedule="* * * * * *", next_run_at=T0)
    with services.db.connection() as conn:
        conn.execute("UPDATE jobs SET max_runs = (CASE WHEN id = %s THEN 1 ELSE 2 END) WHERE id IN (%s, %s)",
                     (one, one, two))
        for job_id in (one, two):
            executions_store.record_claims(conn, [executions_store.Slot(job_id, T0 + second, T0 + 2 * second, 1,
                                                                        T0 + second)])
        late = executions_store.record_claims(conn, [executions_store.Slot(job_id, T0, T0 + second, 1, T0)
                                                     for job_id in (one, two)])
        assert [r.job_id for r in late.runs] == [two]
        assert _job_row(conn, one) == ("active", 1, None)
        assert _job_row(conn, two) == ("active", 2, None)
        assert _runs(conn, one) == [("schedule", "missed"), ("schedule", "queued")]
        assert _runs(conn, two) == [("schedule", "queued"), ("schedule", "queued")]


def test_a_job_whose_last_slot_was_missed_is_deleted_by_maintenance(
        api: Api, services: Services, target: Target, db: Any) -> None:
    """Break: the poller comes back after end_at, so every slot left is recorded missed and the job completed
    with no run to end: no run's end ever deletes it. Must hold: the next maintenance pass deletes it (its
    missed row kept), takes it out of the due index, and a second pass changes nothing."""
    job_id = _job(api, services, target, end_at="2026-11-30T12:00:02Z", end_action="delete", retry=NO_RETRY)
    assert _send_scheduled(services, range(600, 601)) == []
    assert _job_row(db, job_id)[0] == "completed" and _runs(db, job_id) == [("schedule", "missed")]
    report = run_maintenance(services, T0 + timedelta(seconds=601))
    assert _job_row(db, job_id)[0] == "deleted" and _runs(db, job_id) == [("schedule", "missed")]
    assert report.jobs_finished == 1
    assert score_of(services.index, f"j:{job_id}") is None
    assert run_maintenance(services, T0 + timedelta(seconds=661)).jobs_finished == 0


def test_a_job_whose_last_counted_run_was_skipped_is_completed_by_maintenance(
        api: Api, services: Services, target: Target, db: Any) -> None:
    """Break: the max_runs-th run is skipped before it is sent (here as the overlap policy's start writes it),
    so no attempt ends and the job stays active with no next slot. Must hold: maintenance completes it; a job
    whose last run is still queued is left alone until it ends."""
    skipped = _job(api, services, target, max_runs=1, retry=NO_RETRY)
    waiting = _job(api, services, target, max_runs=1, retry=NO_RETRY)
    assert len(_send_scheduled(services, range(0, 1))) == 2
    db.execute("UPDATE executions SET status = 'skipped', last_error = 'skipped: overlap', finished_at = %s"
               " WHERE job_id = %s", (T0, skipped))
    report = run_maintenance(services, T0 + timedelta(seconds=60))
    assert _job_row(db, skipped) == ("completed", 1, None)
    assert _job_row(db, waiting) == ("active", 1, None)
    assert report.jobs_finished == 1


def test_a_job_resumed_after_its_last_run_was_claimed_gets_no_next_slot_and_completes(
        api: Api, services: Services, target: Target, db: Any) -> None:
    """Break: resuming a paused job that had reached max_runs gives it its next slot back: the poller then
    refuses every claim of it and nothing completes it, so it stays active for good. Must hold: resumed, it has
    no next slot; its last run, skipped by the pause (a pause stops what was handed over), leaves maintenance
    to complete it."""
    job_id = _job(api, services, target, max_runs=1, retry=NO_RETRY)
    assert len(_send_scheduled(services, range(0, 1))) == 1
    use_clock((T0 + timedelta(seconds=2)).timestamp)
    assert api.call("POST", f"/jobs/{job_id}/pause").status == 200
    assert api.call("POST", f"/jobs/{job_id}/resume").status == 200
    assert _job_row(db, job_id) == ("active", 1, None)
    assert _runs(db, job_id) == [("schedule", "skipped")]
    assert _send_scheduled(services, range(3, 5)) == []
    report = run_maintenance(services, T0 + timedelta(seconds=60))
    assert report.jobs_finished == 1
    assert _job_row(db, job_id) == ("completed", 1, None)
