"""Writing a watched run's end: its final state, its job's failure counters and the events it raises, in
one transaction, and queueing what that produced (tickwork.rules.notifications has the rules).

Only runs that can raise an event come here (`may_notify`): a job without `notify` or
`pause_after_failures` costs nothing more on success, and on failure only when an operator topic is set.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Sequence

from aws_lambda_powertools import Logger

from tickwork.dueindex.index import DueIndex
from tickwork.models import StartedExecution
from tickwork.outcome import Outcome
from tickwork.rules import notifications as events
from tickwork.rules.notifications import RunEnd, Verdict
from tickwork.store import attempts as attempts_store
from tickwork.store import deadlocks
from tickwork.store import executions as executions_store
from tickwork.store import notifications as store
from tickwork.timeutil import to_ms
from tickwork.vocab import RunStatus

logger = Logger(child=True)


@dataclass(frozen=True)
class Ending:
    """A run's final attempt to write: what finish_attempt takes, the run, and what its target answered."""

    finished: attempts_store.Finished
    run: StartedExecution
    outcome: Outcome


@dataclass
class Noted:
    """What writing run ends produced: the runs still ours, waiting runs released, events to dispatch,
    jobs paused (to take out of the due index), operator summaries to dispatch when their minute is over."""

    kept: set[str] = field(default_factory=set)
    released: list[str] = field(default_factory=list)
    notifications: list[str] = field(default_factory=list)
    paused: list[str] = field(default_factory=list)
    later: list[tuple[str, datetime]] = field(default_factory=list)  # operator summaries, with when they go

    def __bool__(self) -> bool:
        return bool(self.notifications or self.paused or self.later)


def may_notify(run: StartedExecution, status: str, operator: bool) -> bool:
    """Whether a run's final `status` can raise an event: its job is watched, or it failed and the
    deployment publishes failures to an operator topic."""
    return run.watched or (operator and status != RunStatus.SUCCEEDED)


def record_ends(conn: Any, endings: Sequence[Ending], now: datetime, operator: bool) -> Noted:
    """Write the runs' final states, their jobs' counters and their events in one transaction (run again when
    Postgres ends it as a deadlock's victim: tickwork.store.deadlocks)."""
    noted, reasons = deadlocks.in_transaction(conn, lambda c: _record_ends(c, endings, now, operator), "record_ends")
    for job_id, reason in reasons.items():
        logger.warning("job paused after consecutive failed runs", extra={"job_id": job_id, "paused_reason": reason})
    return noted


def _record_ends(
    conn: Any, endings: Sequence[Ending], now: datetime, operator: bool,
) -> tuple[Noted, dict[str, str | None]]:
    noted = Noted()
    # Jobs first, then runs: the order the API's delete takes them in, so neither waits on the other in a cycle.
    watched = [ending.run.job_id for ending in endings if ending.run.watched]
    states = store.lock_states(conn, watched) if watched else {}
    ends: list[tuple[StartedExecution, RunEnd]] = []
    for ending in endings:
        # may_release: the nested transaction it takes is a savepoint, which a refused row needs.
        ended = attempts_store.finish_attempt(conn, ending.finished, may_release=True)
        if ended.released:
            noted.released.append(ended.released)
        if ended.ours:
            noted.kept.add(ending.run.id)
            finished = ending.finished
            end = events.run_end(ending.run, finished.status == RunStatus.SUCCEEDED, finished.attempt.error,
                                 ending.outcome.status_code)
            ends.append((ending.run, end))
    verdicts, raised, failures = _judged(states, ends, now, operator)
    store.save_states(conn, list(verdicts.values()), now)
    noted.notifications = store.insert_events(conn, raised, now)
    noted.later = _summarised(conn, failures, set(noted.notifications))
    noted.paused = [job_id for job_id, v in verdicts.items() if v.paused_reason is not None]
    for job_id in noted.paused:  # stopped at once, as a pause by hand (tickwork.tenant.jobs.pause_job)
        executions_store.skip_scheduled(conn, job_id, now)
    return noted, {job_id: verdicts[job_id].paused_reason for job_id in noted.paused}


def _judged(
    states: dict[str, events.WatchState], ends: list[tuple[StartedExecution, RunEnd]], now: datetime,
    operator: bool,
) -> tuple[dict[str, Verdict], list[events.Event], list[OperatorFailure]]:
    verdicts: dict[str, Verdict] = {}
    raised: list[events.Event] = []
    failures: list[OperatorFailure] = []
    for run, end in ends:
        state = states.get(end.job_id)
        if run.watched and state is not None:
            verdict = events.judge(state, end, now)
            states[end.job_id] = verdict.state
            earlier = verdicts.get(end.job_id)
            reason = verdict.paused_reason or (earlier.paused_reason if earlier else None)
            verdicts[end.job_id] = Verdict(verdict.state, reason, [])
            raised += verdict.events
        if operator and not end.succeeded:
            failures.append(OperatorFailure(events.operator_event(end, now), *events.operator_summary(end, now)))
    # Rows another executor may be writing too (one id per job and minute) are written in id order, so two
    # transactions never wait for each other in a cycle; a job's failures keep their order (a stable sort).
    failures.sort(key=lambda failure: failure.summary.id)
    raised += sorted({f.first.id: f.first for f in failures}.values(), key=lambda first: first.id)
    return verdicts, raised, failures


@dataclass(frozen=True)
class OperatorFailure:
    """A final failure for the operator topic: its minute's first message, or else counted in the summary."""

    first: events.Event
    summary: events.Event
    due: datetime


def _summarised(conn: Any, failures: list[OperatorFailure], inserted: set[str]) -> list[tuple[str, datetime]]:
    """Count each failure that is not its job's first in the minute into the minute's summary; returns the
    summaries new here, to dispatch when their minute is over."""
    later: list[tuple[str, datetime]] = []
    for failure in failures:
        if failure.first.id in inserted:
            inserted.discard(failure.first.id)  # a second failure of the job in this batch is counted
        elif store.summarise(conn, failure.summary, failure.due):
            later.append((failure.summary.id, failure.due))
    return later


def queue(index: DueIndex, noted: Noted, now_ms: int, pipeline: Any) -> None:
    """Dispatch the events raised and take paused jobs out of the index (in `pipeline`). Lost with Redis,
    events are put back by the sweeper from their rows (tickwork.notifications.sweep)."""
    # A millisecond apart, in the order they were raised: dispatched in that order when one poller takes them.
    for offset, notification_id in enumerate(noted.notifications):
        index.schedule_notification(notification_id, 1, now_ms + offset, pipeline=pipeline)
    for notification_id, due in noted.later:
        index.schedule_notification(notification_id, 1, to_ms(due), pipeline=pipeline)
    for job_id in noted.paused:
        index.remove_job(job_id, pipeline)
        index.mark_stopped(job_id, "paused", pipeline)
