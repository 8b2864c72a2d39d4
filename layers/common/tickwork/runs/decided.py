"""A sent run judged (tickwork.runs.executor records it): its outcome as the job's success rules see it
(tickwork.rules.success) and what comes next (tickwork.rules.retry). Pure: `now` and the jitter's random
source are passed in."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from tickwork.http import delivery
from tickwork.interfaces import Result
from tickwork.models import StartedExecution
from tickwork.rules import replay, retry, success
from tickwork.runs import completion
from tickwork.store import executions as store
from tickwork.timeutil import to_ms


@dataclass(frozen=True)
class Decided:
    """A sent run judged: the Result (its run, when it was sent, its outcome as the job's success rules
    see it) and what comes next (tickwork.rules.retry)."""

    run: StartedExecution
    sent_at: datetime
    outcome: delivery.Outcome
    decision: retry.Decision

    @property
    def final(self) -> bool:
        return self.decision.status in store.FINAL_STATUSES

    def finished(self) -> store.Finished:
        """What finish_attempt takes: the run, its attempt's record, its new status, its next attempt's time."""
        error = self.outcome.error if self.decision.reason is None else f"{self.outcome.error}; {self.decision.reason}"
        record = store.AttemptRecord(self.run.attempt, self.sent_at, self.outcome.duration_ms, self.outcome.status_code,
                                     self.outcome.body, error)
        return self.run.id, record, self.decision.status, self.decision.next_attempt_at


def decide(result: Result, now: datetime, uniform: retry.Random) -> Decided:
    """The outcome as the job's success rules judge it, and what comes next."""
    run, outcome = result.run, success.judge(result.run.success, result.outcome)
    policy = retry.RetryPolicy.from_dict(run.retry)
    decision = retry.decide(policy, replay.replay_attempt(run.attempt, run.replay_base), outcome.succeeded,
                            outcome.retryable, now, outcome.retry_after_seconds, uniform)
    if decision.status == "succeeded" and completion.is_callback(run.completion):
        decision = retry.Decision(completion.AWAITING)  # the target accepted the work: it calls back when done
    return Decided(run, result.sent_at, outcome, decision)


def lag_ms(run: StartedExecution, sent_at: datetime) -> int:
    return to_ms(sent_at) - to_ms(run.scheduled_for)


def first_attempt(run: StartedExecution) -> bool:
    """A first attempt sent for its slot, whose lag is the FireLag: not a replay's (sent when asked for)."""
    return run.attempt == 1 and not run.replayed


def retry_origin(run: StartedExecution) -> datetime | None:
    return replay.retry_origin(run.scheduled_for, run.attempt_started_at, run.replayed)
