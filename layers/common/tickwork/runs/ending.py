"""Ending an attempt, the one way for every path that ends one: the executor (its target answered, or not:
tickwork.runs.executor), a completion callback or its deadline (tickwork.runs.awaiting) and the maintenance pass
(an executor that never reported: tickwork.ops.maintenance).

1. Decide, without I/O (`now` and the jitter's random source passed in): the job's retry policy counts the
   attempts of the run's latest replay only (tickwork.rules.replay); an answer the job's success rules accept
   in callback mode awaits its completion (tickwork.rules.completion); a run its lost executor leaves without a
   retry ends `lost`.
2. Bound: a retry of a run its job no longer makes (paused, deleted), or one after the job's next slot after
   the retry's origin (the run's slot, or a replay's attempt), ends the run instead, the reason in the
   attempt's error (tickwork.runs.bounds); Postgres is read only when a run retries.
3. Write, conditional on the attempt still being the running one: the attempt and its run's new status; a
   final end that may raise events with them and its job's counters (tickwork.runs.ends), a run waiting behind
   it (overlap queue_one) released; an accepted answer in callback mode recorded as awaiting. A job whose last
   run this was (no next slot, no scheduled run left) is finished: `completed` once its max_runs-th run ended,
   or deleted (its runs kept) when its end_action is `delete`, whatever ended its schedule.
4. Queue what follows in the due index, in one round trip: the retry, the released runs, the events, the
   paused jobs, the completion checks. Lost with Redis, each is put back by the maintenance pass.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Callable, ContextManager, Sequence

from aws_lambda_powertools import Logger

from tickwork.dueindex.index import DueIndex
from tickwork.interfaces import Result
from tickwork.models import StartedExecution
from tickwork.outcome import FailureKind, Outcome
from tickwork.rules import completion, replay, retry
from tickwork.runs import bounds, ends
from tickwork.store import attempts as store
from tickwork.store import completions as completions_store
from tickwork.store import executions as executions_store
from tickwork.timeutil import rfc3339, to_ms
from tickwork.vocab import FINAL_STATUSES, JobStatus, NotEnded, Overlap, RunStatus

logger = Logger(child=True)


@dataclass(frozen=True)
class AttemptEnd:
    """An attempt that ended and what comes of it: its run, when it started, its outcome (as the job's success
    rules see it) and the decision (tickwork.rules.retry). `lost`: its executor never reported, so a run not
    retried ends `lost`, not `failed`."""

    run: StartedExecution
    sent_at: datetime
    outcome: Outcome
    decision: retry.Decision
    lost: bool = False

    @property
    def status(self) -> RunStatus:
        """The run's new status."""
        return RunStatus.LOST if self.lost and self.decision.status == RunStatus.FAILED else self.decision.status

    @property
    def final(self) -> bool:
        return self.status in FINAL_STATUSES

    @property
    def error(self) -> str | None:
        """The attempt's error, with why a failure that could have been retried was not."""
        if self.decision.reason is None:
            return self.outcome.error
        return f"{self.outcome.error}; {self.decision.reason}"

    def finished(self) -> store.Finished:
        """What finish_attempt takes: the run, its attempt's record, its new status, its next attempt's time."""
        record = store.AttemptRecord(self.run.attempt, self.sent_at, self.outcome.duration_ms, self.outcome.status_code,
                                     self.outcome.body, self.error)
        return store.Finished(self.run.id, record, self.status, self.decision.next_attempt_at)


# ---------------------------------------------------------------- decide (pure)

def decide(run: StartedExecution, succeeded: bool, retryable: bool, now: datetime, uniform: retry.Random | None = None,
           retry_after_seconds: float | None = None) -> retry.Decision:
    """What follows the run's attempt: its job's retry policy counting the attempts of its latest replay only; a
    retry jittered with `uniform` when given (none: the exact delay)."""
    return retry.decide(retry.RetryPolicy.from_dict(run.retry), replay.replay_attempt(run.attempt, run.replay_base),
                        succeeded, retryable, now, retry_after_seconds, uniform)


def answered(result: Result, now: datetime, uniform: retry.Random) -> AttemptEnd:
    """A sent attempt, its outcome judged by its kind of target (tickwork.targets.base.Target.judge: the job's
    success rules); an accepted answer in callback mode awaits its completion (the target calls back when the
    work is done)."""
    run, outcome = result.run, result.outcome
    decision = decide(run, outcome.succeeded, outcome.retryable, now, uniform, outcome.retry_after_seconds)
    if decision.status == RunStatus.SUCCEEDED and completion.is_callback(run.completion):
        decision = retry.Decision(RunStatus.AWAITING_COMPLETION)
    return AttemptEnd(run, result.sent_at, outcome, decision)


def settled(run: StartedExecution, waiting: completion.Awaiting, verdict: completion.Settled, now: datetime,
            uniform: retry.Random | None) -> AttemptEnd:
    """An awaited attempt settled by its callback or its deadline: a failure is retried as a 5xx answer is."""
    outcome = Outcome(waiting.status_code, None, verdict.error, waiting.duration_ms,
                      failure=None if verdict.succeeded else FailureKind.CALLBACK)
    return AttemptEnd(run, waiting.started_at, outcome, decide(run, verdict.succeeded, True, now, uniform))


def lost(run: StartedExecution, started_at: datetime, now: datetime, waited_seconds: float,
         uniform: retry.Random | None) -> AttemptEnd:
    """An attempt whose executor did not report within `waited_seconds`. Its request may have been sent: a retry
    repeats it under the same run id, as after a timeout."""
    elapsed_ms = int((now - started_at) / timedelta(milliseconds=1))
    outcome = Outcome(None, None, f"lost: executor did not report within {waited_seconds:g} s", elapsed_ms,
                      failure=FailureKind.LOST)
    return AttemptEnd(run, started_at, outcome, decide(run, False, True, now, uniform), lost=True)


def retry_origin(end: AttemptEnd) -> datetime | None:
    """What the retry is bounded from: the run's slot, or for a replay when its attempt started."""
    return replay.retry_origin(end.run.scheduled_for, end.run.attempt_started_at or end.sent_at, end.run.replayed)


def within(end: AttemptEnd, limit: retry.Bound) -> AttemptEnd:
    """The end with its retry bounded by its job (`limit`, tickwork.runs.bounds)."""
    decision = retry.within(retry.RetryPolicy.from_dict(end.run.retry), end.decision, limit)
    return end if decision is end.decision else replace(end, decision=decision)


# ---------------------------------------------------------------- bound, write, queue

@dataclass
class Written:
    """Attempt ends written: each (bounded), the runs still ours (their attempt recorded), the waiting runs
    released, what their events produced (tickwork.runs.ends) and the completion checks to queue."""

    ended: list[AttemptEnd]
    kept: set[str] = field(default_factory=set)
    released: list[str] = field(default_factory=list)
    noted: ends.Noted = field(default_factory=ends.Noted)
    checks: list[Check] = field(default_factory=list)
    finished: dict[str, str] = field(default_factory=dict)  # jobs whose last run ended: their new status

    def statuses(self) -> dict[str, str]:
        """Each run's new status, or 'superseded' if its attempt was no longer ours to end."""
        return {e.run.id: e.status if e.run.id in self.kept else NotEnded.SUPERSEDED for e in self.ended}


@dataclass(frozen=True)
class Check:
    """When to settle a run's wait: at its deadline, or at once when its completion is already in."""

    execution_id: str
    attempt: int
    due_ms: int


def end(connect: Callable[[], ContextManager[Any]], index: DueIndex, decided: Sequence[AttemptEnd], now: datetime,
        operator: bool) -> Written:
    """Bound, write and queue the ends of attempts (`connect()`: a Postgres connection, not in a transaction)."""
    bounded = bound(connect, decided)
    with connect() as conn:
        written = write(conn, bounded, now, operator)
    queue(index, written, now)
    return written


def bound(connect: Callable[[], ContextManager[Any]], decided: Sequence[AttemptEnd]) -> list[AttemptEnd]:
    """Each retry bounded by its job; a connection is taken only when one retries."""
    return bounds.bounded(connect, decided, lambda e: bounds.Retrying(e.run.id, e.run.job_id, retry_origin(e),
                                                                      e.run.retry, e.decision), within)


def write(conn: Any, bounded: Sequence[AttemptEnd], now: datetime, operator: bool) -> Written:
    """Write the attempts and their runs' new status, one statement for all that neither release a waiting run
    nor raise an event (outside a transaction, a batch the database refuses is written run by run)."""
    written = Written(list(bounded))
    plain: list[AttemptEnd] = []
    releasing: list[AttemptEnd] = []
    noting: list[AttemptEnd] = []  # ends that may raise events (tickwork.runs.ends), written with them
    answers: list[AttemptEnd] = []  # accepted, awaiting their callback
    for e in bounded:
        if e.status == RunStatus.AWAITING_COMPLETION:
            answers.append(e)
        elif e.final and ends.may_notify(e.run, e.status, operator):
            noting.append(e)
        else:
            (releasing if e.final and e.run.overlap != Overlap.ALLOW else plain).append(e)
    written.kept = store.finish_attempts(conn, [e.finished() for e in plain])
    written.kept |= _await(conn, answers, now, written.checks)
    for e in releasing:
        ended = store.finish_attempt(conn, e.finished())
        if ended.ours:
            written.kept.add(e.run.id)
        if ended.released:
            written.released.append(ended.released)
    if noting:
        written.noted = ends.record_ends(conn, [ends.Ending(e.finished(), e.run, e.outcome) for e in noting], now,
                                         operator)
        written.kept |= written.noted.kept
        written.released += written.noted.released
    written.finished = _finish(conn, [e for e in bounded if e.final and e.run.id in written.kept], now)
    return written


def _finish(conn: Any, ended: Sequence[AttemptEnd], now: datetime) -> dict[str, str]:
    """Complete or delete the jobs whose last run is among the runs `ended` (tickwork.store.executions)."""
    finished = executions_store.finish_jobs(conn, [e.run.job_id for e in ended], now)
    for job_id, status in finished.items():
        logger.info("job finished: its last run ended", extra={"job_id": job_id, "job_status": status})
    return finished


def _await(conn: Any, answers: Sequence[AttemptEnd], now: datetime, checks: list[Check]) -> set[str]:
    """Record accepted answers of callback-mode attempts as awaiting; returns the runs still ours, adding to
    `checks` when each is to be settled (at once when its completion came in first)."""
    waits = [completions_store.Answered(e.run.id, e.run.attempt, completion.deadline(now, e.run.completion),
                                        e.sent_at, e.outcome.duration_ms, e.outcome.status_code, e.outcome.body)
             for e in answers]
    reported = completions_store.await_completion(conn, waits)
    for wait in waits:
        if wait.execution_id in reported:
            due = now if reported[wait.execution_id] else wait.deadline
            checks.append(Check(wait.execution_id, wait.number, to_ms(due)))
            logger.info("run awaiting its completion", extra={"execution_id": wait.execution_id, "attempt": wait.number,
                                                              "completion_deadline": rfc3339(wait.deadline)})
    return set(reported)


def queue(index: DueIndex, written: Written, now: datetime) -> None:
    """What the written ends call for, in one pipeline: retries, released runs, events, paused jobs, checks."""
    retries = [(e.run, at) for e in written.ended if e.run.id in written.kept and (at := e.decision.next_attempt_at)]
    if not retries and not written.released and not written.noted and not written.checks and not written.finished:
        return
    pipe = index.pipeline()
    for run, at in retries:
        index.schedule_execution(run.id, run.attempt + 1, to_ms(at), pipeline=pipe)
    for execution_id in written.released:
        index.schedule_execution(execution_id, 1, to_ms(now), pipeline=pipe)
    ends.queue(index, written.noted, to_ms(now), pipe)
    for check in written.checks:
        index.schedule_completion_check(check.execution_id, check.attempt, check.due_ms, pipeline=pipe)
    _unindex(index, written.finished, pipe)
    pipe.execute()


def finish(conn: Any, index: DueIndex, job_ids: Sequence[str], now: datetime) -> dict[str, str]:
    """The jobs of these that no run's end will finish (their last slot skipped or missed, say), finished as a
    final end finishes them, and taken out of the due index; returns each one's new status."""
    finished = executions_store.finish_jobs(conn, job_ids, now)
    for job_id, status in finished.items():
        logger.info("job finished: its last slot ended", extra={"job_id": job_id, "job_status": status})
    if finished:
        pipe = index.pipeline()
        _unindex(index, finished, pipe)
        pipe.execute()
    return finished


def _unindex(index: DueIndex, finished: dict[str, str], pipe: Any) -> None:
    for job_id, status in finished.items():  # lost with Redis: maintenance takes them out
        index.remove_job(job_id, pipe)
        if status == JobStatus.DELETED:
            index.mark_stopped(job_id, JobStatus.DELETED, pipe)
