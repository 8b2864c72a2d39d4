"""The maintenance pass's decisions, without I/O: when a claim or an attempt is lost, and what follows."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from typing import Any

from tickwork.models import StartedExecution
from tickwork.ops.maintenance import (
    judge_running,
    redispatch,
    request_timeout_seconds,
    rewind_before,
)
from tickwork.rules.retry import Bound
from tickwork.runs.ending import within
from tickwork.settings import Settings
from tickwork.store.maintenance import AwaitingDispatch, RunningAttempt
from tickwork.timeutil import to_ms

T0 = datetime(2026, 3, 29, 0, 59, 30, tzinfo=timezone.utc)
SETTINGS = Settings(database_url="postgresql://x", redis_url="redis://x")
RETRY = {"strategy": "fixed", "max_attempts": 3, "delay_seconds": 10}


def attempt_of(started_ago_s: float, retry: dict[str, Any], attempt: int = 1, timeout: float | None = 5,
               slot: datetime = T0 - timedelta(seconds=105)) -> RunningAttempt:
    request = {"url": "https://example.com"} | ({} if timeout is None else {"timeout_seconds": timeout})
    started_at = T0 - timedelta(seconds=started_ago_s)
    return RunningAttempt(StartedExecution("run-1", "job-1", "tenant-1", slot, attempt, request, retry,
                                           attempt_started_at=started_at), started_at)


def running(started_ago_s: float, attempt: int = 1, timeout: float | None = 5) -> RunningAttempt:
    return attempt_of(started_ago_s, RETRY, attempt, timeout)


def test_an_attempt_is_lost_only_after_its_timeout_plus_the_margin() -> None:
    assert judge_running(running(65), T0, SETTINGS) is not None
    assert judge_running(running(64.9), T0, SETTINGS) is None


def test_a_lost_attempt_with_attempts_left_is_retried_by_the_policy() -> None:
    lost = judge_running(running(100), T0, SETTINGS)
    assert lost is not None
    assert (lost.status, lost.decision.next_attempt_at) == ("retrying", T0 + timedelta(seconds=10))
    record = lost.finished().attempt
    assert (record.number, record.started_at, record.duration_ms) == (1, T0 - timedelta(seconds=100), 100_000)
    assert (record.status_code, record.error) == (None, "lost: executor did not report within 65 s")


def test_a_lost_last_attempt_ends_lost() -> None:
    lost = judge_running(running(100, attempt=3), T0, SETTINGS)
    assert lost is not None and (lost.status, lost.decision.next_attempt_at) == ("lost", None)
    finished = lost.finished()
    assert (finished.status, finished.next_attempt_at) == ("lost", None)


def test_the_request_timeout_defaults_and_is_capped_as_the_executor_does() -> None:
    assert request_timeout_seconds({}, 120) == 30
    assert request_timeout_seconds({"timeout_seconds": 500}, 120) == 120
    assert judge_running(running(179, timeout=500), T0, SETTINGS) is None
    assert judge_running(running(181, timeout=500), T0, SETTINGS) is not None


def test_an_overdue_dispatch_fires_now_and_a_future_retry_keeps_its_time() -> None:
    assert redispatch(AwaitingDispatch("q", 1, None), T0).fire_at_ms == to_ms(T0)
    assert redispatch(AwaitingDispatch("r", 2, T0 - timedelta(minutes=5)), T0).fire_at_ms == to_ms(T0)
    ahead = redispatch(AwaitingDispatch("r", 3, T0 + timedelta(minutes=5)), T0)
    assert (ahead.execution_id, ahead.attempt, ahead.fire_at_ms) == ("r", 3, to_ms(T0 + timedelta(minutes=5)))


def test_the_rewind_grace_never_drops_below_a_claim_in_flight() -> None:
    assert rewind_before(T0, SETTINGS) == T0 - timedelta(seconds=10)
    tight = Settings(database_url="x", redis_url="x", reconcile_grace_seconds=0, lookahead_ms=3_000)
    assert rewind_before(T0, tight) == T0 - timedelta(seconds=4)


def test_settings_read_the_maintenance_knobs() -> None:
    env = {"DATABASE_URL": "x", "REDIS_URL": "y", "TICKWORK_RETENTION_DAYS": "7",
           "TICKWORK_RECONCILE_GRACE_SECONDS": "20", "TICKWORK_SWEEP_AFTER_SECONDS": "90",
           "TICKWORK_LOST_MARGIN_SECONDS": "45"}
    settings = Settings.from_env(env)
    assert (settings.retention_days, settings.reconcile_grace_seconds) == (7, 20)
    assert (settings.sweep_after_seconds, settings.lost_margin_seconds) == (90, 45)
    defaults = Settings.from_env({"DATABASE_URL": "x", "REDIS_URL": "y"})
    assert (defaults.retention_days, defaults.sweep_after_seconds, defaults.lost_margin_seconds) == (30, 60, 60)


def test_a_lost_attempts_retry_is_jittered_like_the_executors() -> None:
    """The sweeper's retry follows the job's jitter mode with the random source it is given."""
    full = attempt_of(100, {**RETRY, "jitter": "full"})
    lost = judge_running(full, T0, SETTINGS, uniform=lambda: 0.25)
    assert lost is not None and lost.decision.next_attempt_at == T0 + timedelta(seconds=2.5)
    exact = judge_running(full, T0, SETTINGS)  # no random source: the exact delay
    assert exact is not None and exact.decision.next_attempt_at == T0 + timedelta(seconds=10)


def test_a_lost_attempts_retry_after_the_next_slot_ends_the_run_unless_allowed() -> None:
    def attempt(past_next_run: bool) -> RunningAttempt:
        return attempt_of(100, {**RETRY, "jitter": "none", "past_next_run": past_next_run})

    lost = judge_running(attempt(False), T0, SETTINGS)
    assert lost is not None and lost.status == "retrying"  # due at T0 + 10 s
    ended = within(lost, Bound(T0 + timedelta(seconds=5)))
    assert (ended.status, ended.decision.next_attempt_at) == ("lost", None)
    assert ended.finished().attempt.error.startswith(
        "lost: executor did not report within 65 s; not retried: the next attempt")
    assert within(lost, Bound(T0 + timedelta(seconds=10))) is lost  # lands on the slot: kept
    assert within(lost, Bound(None)) is lost  # the job has no next run
    lost_allowed = judge_running(attempt(True), T0, SETTINGS)
    assert lost_allowed is not None and within(lost_allowed, Bound(T0 + timedelta(seconds=5))) is lost_allowed


def test_a_lost_attempts_retry_of_a_stopped_job_ends_the_run_whatever_its_policy() -> None:
    """A paused or deleted job has no next slot; that must not let the retry through (past_next_run or not)."""
    for past_next_run in (False, True):
        lost = judge_running(attempt_of(100, {**RETRY, "jitter": "none", "past_next_run": past_next_run}), T0, SETTINGS)
        assert lost is not None and lost.status == "retrying"
        ended = within(lost, Bound(None, "paused"))
        assert (ended.status, ended.decision.next_attempt_at) == ("lost", None)
        assert ended.finished().attempt.error == "lost: executor did not report within 65 s; not retried: the job was paused"
