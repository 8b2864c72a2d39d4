"""Ending an attempt, decided without I/O (tickwork.runs.ending): the same counting and bounding whichever path
ends the attempt (an answer, a callback or its deadline, a lost executor), on pinned instants."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from tickwork.interfaces import Result
from tickwork.models import StartedExecution
from tickwork.outcome import FailureKind, Outcome
from tickwork.rules import completion
from tickwork.rules.retry import Bound
from tickwork.runs import ending

T0 = datetime(2027, 2, 3, 12, 0, 0, tzinfo=timezone.utc)
REPLAYED_AT = T0 + timedelta(days=1)
RETRY = {"strategy": "fixed", "max_attempts": 3, "delay_seconds": 1, "jitter": "none", "past_next_run": False}
CALLBACK = {"mode": "callback", "timeout_seconds": 60}


def run(attempt: int, replay_base: int = 0, started_at: datetime = T0) -> StartedExecution:
    return StartedExecution("run-1", "job-1", "tenant-1", T0, attempt, {"url": "https://example.com"}, RETRY,
                            attempt_started_at=started_at, replay_base=replay_base, replay_count=int(replay_base > 0),
                            completion=CALLBACK)


def waiting(reported: str | None) -> completion.Awaiting:
    return completion.Awaiting("run-1", 4, REPLAYED_AT + timedelta(seconds=60), 60, reported, None, REPLAYED_AT, 12,
                               202)


def three_ways(of: StartedExecution, now: datetime) -> list[ending.AttemptEnd]:
    """The same failed attempt ended by an answer (503), by a callback reporting `failed`, and by a lost executor."""
    sent = Result(of, now, Outcome(503, "busy", "HTTP 503", 12, failure=FailureKind.TRANSIENT_STATUS))
    reported = completion.settle(waiting("failed"), now)
    assert reported is not None
    return [ending.answered(sent, now, lambda: 0.5), ending.settled(of, waiting("failed"), reported, now, None),
            ending.lost(of, now - timedelta(seconds=70), now, 65, None)]


@pytest.mark.parametrize("way", [0, 1, 2], ids=["answer", "callback", "lost executor"])
def test_a_replays_attempts_are_counted_from_the_replay_on_every_path(way: int) -> None:
    now = REPLAYED_AT + timedelta(seconds=1)
    for attempt, status in ((4, "retrying"), (5, "retrying"), (6, "failed")):
        end = three_ways(run(attempt, replay_base=3, started_at=REPLAYED_AT), now)[way]
        expected = "lost" if way == 2 and status == "failed" else status
        assert end.status == expected, (attempt, end.decision)
    plain = three_ways(run(3), T0 + timedelta(seconds=1))[way]  # not replayed: its 3rd attempt is its last
    assert plain.status == ("lost" if way == 2 else "failed")


@pytest.mark.parametrize("way", [0, 1, 2], ids=["answer", "callback", "lost executor"])
def test_a_replays_retry_is_bounded_from_when_its_attempt_started_on_every_path(way: int) -> None:
    end = three_ways(run(4, replay_base=3, started_at=REPLAYED_AT), REPLAYED_AT + timedelta(seconds=1))[way]
    assert ending.retry_origin(end) == REPLAYED_AT
    assert ending.retry_origin(three_ways(run(1), T0)[way]) == T0  # not replayed: its slot
    bounded = ending.within(end, Bound(REPLAYED_AT + timedelta(seconds=1.5)))  # the retry lands after the slot
    assert bounded.status == ("lost" if way == 2 else "failed") and bounded.decision.next_attempt_at is None
    assert bounded.error is not None and bounded.error.endswith(
        "; not retried: the next attempt would be after the job's next run at 2027-02-04T12:00:01.500Z"
        " (retry.past_next_run is false)")
    assert ending.within(end, Bound(REPLAYED_AT + timedelta(hours=1))) is end


def test_an_accepted_answer_in_callback_mode_awaits_and_in_response_mode_succeeds() -> None:
    accepted = Result(run(1), T0, Outcome(202, "queued", None, 12, failure=None))
    assert ending.answered(accepted, T0, lambda: 0.5).status == completion.AWAITING
    plain = replace(accepted, run=replace(run(1), completion=None))
    assert ending.answered(plain, T0, lambda: 0.5).status == "succeeded"


def test_a_settled_attempt_is_recorded_with_its_answer_and_the_reason_it_was_not_retried() -> None:
    reported = completion.settle(waiting("failed"), REPLAYED_AT)
    assert reported is not None
    end = ending.within(ending.settled(run(4, 3, REPLAYED_AT), waiting("failed"), reported, REPLAYED_AT, None),
                        Bound(None, "paused"))
    finished = end.finished()
    record = finished.attempt
    assert (finished.execution_id, finished.status, finished.next_attempt_at) == ("run-1", "failed", None)
    assert (record.number, record.started_at, record.duration_ms, record.status_code, record.response_body) == (
        4, REPLAYED_AT, 12, 202, None)
    assert record.error == f"{completion.FAILED_NOTE}; not retried: the job was paused"
