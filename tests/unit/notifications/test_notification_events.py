"""What a watched job's run ending means (tickwork.rules.notifications.judge): pure, `now` pinned."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

from tickwork.rules import notifications
from tickwork.rules.notifications import RunEnd, WatchState

NOW = datetime(2026, 10, 25, 0, 30, tzinfo=timezone.utc)
STATE = WatchState("j1", "t1", "active", {"url": "https://example.com/n", "on": ["failure", "recovery", "paused"]},
                   3, 0, False)
FAILED = RunEnd("e1", "j1", "t1", datetime(2026, 10, 25, 0, 29, tzinfo=timezone.utc), 3, False, "HTTP 500", 500)
SUCCEEDED = replace(FAILED, execution_id="e2", succeeded=True, error=None, status_code=200)


def test_a_final_failure_counts_and_notifies() -> None:
    verdict = notifications.judge(STATE, FAILED, NOW)
    assert (verdict.state.consecutive_failures, verdict.state.failing, verdict.paused_reason) == (1, True, None)
    (event,) = verdict.events
    assert event.payload == {
        "id": event.id, "type": "run.failed", "job_id": "j1", "execution_id": "e1",
        "scheduled_for": "2026-10-25T00:29:00.000Z", "attempts": 3, "error": "HTTP 500", "status_code": 500,
        "occurred_at": "2026-10-25T00:30:00.000Z",
    }
    assert event.url == "https://example.com/n" and event.channel == "webhook"


def test_the_event_id_is_stable_for_the_same_end() -> None:
    assert notifications.judge(STATE, FAILED, NOW).events[0].id == notifications.judge(STATE, FAILED, NOW).events[0].id
    assert notifications.judge(STATE, FAILED, NOW).events[0].id != notifications.operator_event(FAILED, NOW).id


def test_the_nth_failure_pauses_once() -> None:
    verdict = notifications.judge(replace(STATE, consecutive_failures=2, failing=True), FAILED, NOW)
    assert verdict.state.status == "paused"
    assert verdict.paused_reason == "paused after 3 consecutive failed runs (pause_after_failures: 3)"
    assert [e.type for e in verdict.events] == ["run.failed", "job.paused"]
    again = notifications.judge(verdict.state, replace(FAILED, execution_id="e3"), NOW)
    assert again.paused_reason is None and [e.type for e in again.events] == ["run.failed"]


def test_recovery_only_after_failures() -> None:
    assert notifications.judge(STATE, SUCCEEDED, NOW).events == []
    recovered = notifications.judge(replace(STATE, consecutive_failures=2, failing=True), SUCCEEDED, NOW)
    assert [e.type for e in recovered.events] == ["job.recovered"]
    assert (recovered.state.consecutive_failures, recovered.state.failing) == (0, False)


def test_only_the_chosen_events_are_sent() -> None:
    quiet = replace(STATE, notify={"url": "https://example.com/n", "on": ["paused"]}, consecutive_failures=2)
    assert [e.type for e in notifications.judge(quiet, FAILED, NOW).events] == ["job.paused"]
    unnotified = replace(STATE, notify=None, consecutive_failures=2)
    verdict = notifications.judge(unnotified, FAILED, NOW)
    assert verdict.events == [] and verdict.state.status == "paused"


def test_operator_events_are_one_per_job_and_minute_and_the_summary_goes_when_the_minute_is_over() -> None:
    other_run = replace(FAILED, execution_id="e9")
    first = notifications.operator_event(FAILED, NOW)
    assert first.id == notifications.operator_event(other_run, NOW.replace(second=59)).id
    assert first.id != notifications.operator_event(FAILED, NOW.replace(minute=31)).id
    assert first.payload["id"] == first.id and first.payload["minute"] == "2026-10-25T00:30:00.000Z"
    summary, due = notifications.operator_summary(other_run, NOW.replace(second=40))
    assert summary.id not in (first.id, notifications.operator_summary(FAILED, NOW.replace(minute=31))[0].id)
    assert (summary.payload["execution_id"], summary.payload["failures"], summary.payload["summary"]) == ("e9", 1, True)
    assert due == NOW + notifications.SUMMARY_AFTER and due > NOW.replace(minute=31)
