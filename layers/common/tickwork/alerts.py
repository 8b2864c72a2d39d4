"""The I/O around tickwork.notifications: writing a watched run's end with its events, queueing and
delivering them, and bounding retries by the job's next slot.

Only runs that can raise an event come here (`may_notify`): a job without `notify` or
`pause_after_failures` costs nothing more on success, and on failure only when an operator topic is set.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Sequence

from aws_lambda_powertools import Logger

from tickwork import notifications, retry
from tickwork.delivery import Outcome
from tickwork.dueindex import DueIndex
from tickwork.errors import ScheduleError
from tickwork.models import Dispatch, StartedExecution
from tickwork.notifications import OPERATOR, RunEnd, Verdict
from tickwork.store import executions as executions_store
from tickwork.store import maintenance as maintenance_store
from tickwork.store import notifications as store
from tickwork.timeutil import to_ms

if TYPE_CHECKING:
    from tickwork.executor import Executor

logger = Logger(child=True)

_STATUS_AFTER = {"succeeded": "delivered", "retrying": "pending", "failed": "failed"}
Ending = tuple[executions_store.Finished, StartedExecution, Outcome]  # finish_attempt's arguments, the run, its outcome


@dataclass
class Noted:
    """What writing run ends produced: the runs still ours, waiting runs released, events to dispatch,
    jobs paused (to take out of the due index)."""

    kept: set[str] = field(default_factory=set)
    released: list[str] = field(default_factory=list)
    notifications: list[str] = field(default_factory=list)
    paused: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.notifications or self.paused)


def may_notify(run: StartedExecution, status: str, operator: bool) -> bool:
    """Whether a run's final `status` can raise an event: its job is watched, or it failed and the
    deployment publishes failures to an operator topic."""
    return run.watched or (operator and status != "succeeded")


def record_ends(conn: Any, endings: Sequence[Ending], now: datetime, operator: bool) -> Noted:
    """Write the runs' final states, their jobs' counters and their events in one transaction."""
    noted = Noted()
    with conn.transaction():
        # Jobs first, then runs: the order the API's delete takes them in, so neither waits on the other in a cycle.
        watched = [run.job_id for _, run, _ in endings if run.watched]
        states = store.lock_states(conn, watched) if watched else {}
        ends: list[tuple[StartedExecution, RunEnd]] = []
        for finished, run, outcome in endings:
            # may_release: the nested transaction it takes is a savepoint, which a refused row needs.
            ours, freed = executions_store.finish_attempt(conn, *finished, may_release=True)
            if freed:
                noted.released.append(freed)
            if ours:
                noted.kept.add(run.id)
                succeeded = finished[2] == "succeeded"
                ends.append((run, notifications.run_end(run, succeeded, finished[1].error, outcome.status_code)))
        verdicts, events = _judged(states, ends, now, operator)
        store.save_states(conn, list(verdicts.values()), now)
        noted.notifications = store.insert_events(conn, events, now)
    noted.paused = [job_id for job_id, v in verdicts.items() if v.paused_reason is not None]
    for job_id in noted.paused:
        logger.warning("job paused after consecutive failed runs", extra={
            "job_id": job_id, "paused_reason": verdicts[job_id].paused_reason})
    return noted


def _judged(
    states: dict[str, notifications.WatchState], ends: list[tuple[StartedExecution, RunEnd]], now: datetime,
    operator: bool,
) -> tuple[dict[str, Verdict], list[notifications.Event]]:
    verdicts: dict[str, Verdict] = {}
    events: list[notifications.Event] = []
    for run, end in ends:
        state = states.get(end.job_id)
        if run.watched and state is not None:
            verdict = notifications.judge(state, end, now)
            states[end.job_id] = verdict.state
            earlier = verdicts.get(end.job_id)
            reason = verdict.paused_reason or (earlier.paused_reason if earlier else None)
            verdicts[end.job_id] = Verdict(verdict.state, reason, [])
            events += verdict.events
        if operator and not end.succeeded:
            events.append(notifications.operator_event(end, now))
    return verdicts, events


def end_lost(
    conn: Any, index: DueIndex, execution_id: str, record: executions_store.AttemptRecord, now: datetime,
    operator: bool,
) -> tuple[bool, str | None]:
    """The sweeper ends a run `lost`: finish_attempt's answer, with the run's events written alongside
    and queued when its job is watched (or failures go to the operator topic)."""
    run = store.run_of(conn, execution_id)
    if run is None or not may_notify(run, "lost", operator):
        return executions_store.finish_attempt(conn, execution_id, record, "lost", None)
    outcome = Outcome(None, None, record.error, record.duration_ms)
    noted = record_ends(conn, [((execution_id, record, "lost", None), run, outcome)], now, operator)
    pipe = index.pipeline()
    queue(index, noted, to_ms(now), pipe)
    pipe.execute()
    return bool(noted.kept), noted.released[0] if noted.released else None


def queue(index: DueIndex, noted: Noted, now_ms: int, pipeline: Any) -> None:
    # A millisecond apart, in the order they were raised: dispatched in that order when one poller takes them.
    for offset, notification_id in enumerate(noted.notifications):
        index.schedule_notification(notification_id, 1, now_ms + offset, pipeline=pipeline)
    for job_id in noted.paused:
        index.remove_job(job_id, pipeline)


# ---------------------------------------------------------------- retries and the next slot

def before_next_slots(db: Any, decided: list[Any]) -> list[Any]:
    """Decisions (run, sent_at, outcome, decision) with every retry that would land after its job's next
    slot turned into a failure, unless the job's policy allows it. Reads Postgres only for those retries."""
    needing = [i for i, (run, _, _, d) in enumerate(decided) if needs_next_slot(run.retry, d)]
    if not needing:
        return decided
    with db.connection() as conn:
        slots = next_slots(conn, [(decided[i][0].job_id, decided[i][0].scheduled_for) for i in needing])
    bounded = list(decided)
    for i, slot in zip(needing, slots):
        run, sent_at, outcome, decision = decided[i]
        bounded[i] = (run, sent_at, outcome,
                      retry.before_next_slot(retry.RetryPolicy.from_dict(run.retry), decision, slot))
    return bounded


def needs_next_slot(policy: dict[str, Any], decision: retry.Decision) -> bool:
    return retry.needs_next_slot(retry.RetryPolicy.from_dict(policy), decision)


def next_slots(conn: Any, runs: list[tuple[str, datetime | None]]) -> list[datetime | None]:
    """For each (job id, slot): the job's first slot after it, None for a job no longer active. One read."""
    rows = {row.id: row for row in maintenance_store.index_rows(conn, [job_id for job_id, _ in runs])}
    return [next_slot(rows.get(job_id), slot) for job_id, slot in runs]


def next_slot(row: maintenance_store.IndexRow | None, after: datetime | None) -> datetime | None:
    """The job's first slot after the run's; None for a job no longer active (it has no next run)."""
    if row is None or after is None:
        return None
    # The schedule engine loads with the first retry bounded by its job's next slot, not with every executor.
    from tickwork.scheduling import job_schedule

    try:
        return job_schedule(row).next_after(after)
    except ScheduleError:
        return None


# ---------------------------------------------------------------- delivery

def deliver(executor: Executor, dispatches: Sequence[Dispatch]) -> list[str]:
    """Send each notification attempt dispatched; returns each one's status, or 'duplicate'."""
    return [_deliver_one(executor, dispatch) for dispatch in dispatches]


def _deliver_one(executor: Executor, dispatch: Dispatch) -> str:
    svc = executor.svc
    with svc.db.connection() as conn:
        started = store.start(conn, dispatch.execution_id, dispatch.attempt)
    if started is None:
        return "duplicate"
    outcome = publish(svc, started) if started.channel == OPERATOR else _send(executor, started)
    now = datetime.fromtimestamp(executor.clock(), tz=timezone.utc)
    decision = retry.decide(notifications.DELIVERY_RETRY, started.attempt, outcome.succeeded, outcome.retryable, now,
                            outcome.retry_after_seconds, executor.uniform)
    status = _STATUS_AFTER[decision.status]
    with svc.db.connection() as conn:
        ours = store.finish(conn, started.id, started.attempt, status, decision.next_attempt_at, outcome.status_code,
                            outcome.error)
    if ours and decision.next_attempt_at is not None:
        executor.index.schedule_notification(started.id, started.attempt + 1, to_ms(decision.next_attempt_at))
    logger.info("notification attempt finished", extra={
        "notification_id": started.id, "job_id": started.job_id, "attempt": started.attempt, "status": status,
        "channel": started.channel, "status_code": outcome.status_code, "error": outcome.error})
    return status if ours else "superseded"


def _send(executor: Executor, started: store.Delivery) -> Outcome:
    """Through the executor's own steps: the SSRF check, the same request building (and signing) as runs."""
    run = notifications.as_run(started.id, started.tenant_id, started.job_id, started.url or "", started.payload,
                               started.attempt, started.created_at, started.attempt_started_at)
    prepared = executor.prepare(run)
    executor.fire(prepared)
    return prepared.complete()


def publish(svc: Any, started: store.Delivery) -> Outcome:
    """An operator event to the deployment's SNS topic."""
    topic = svc.settings.operator_topic_arn
    if svc.sns is None or not topic:
        return Outcome(None, None, "refused: no operator topic is configured", 0)
    begun = time.monotonic()
    try:
        svc.sns.publish(
            TopicArn=topic, Subject=f"Tickwork: a run of job {started.job_id} failed",
            Message=notifications.body(started.payload),
            MessageAttributes={"type": {"DataType": "String", "StringValue": str(started.payload.get("type"))}},
        )
    except Exception as exc:  # botocore's errors: kept by kind only, like every delivery error
        code = getattr(exc, "response", {}).get("Error", {}).get("Code") or type(exc).__name__
        return Outcome(None, None, f"publish failed: {code}", _ms_since(begun))
    return Outcome(None, None, None, _ms_since(begun), accepted=True)


def _ms_since(begun: float) -> int:
    return int((time.monotonic() - begun) * 1000)


# ---------------------------------------------------------------- the sweeper's part

def sweep(conn: Any, index: DueIndex, now: datetime, settings: Any, limit: int) -> tuple[int, int]:
    """Put back notification dispatches the index lost and end attempts whose executor died (retried like
    a run's lost attempt); returns (re-dispatched, ended)."""
    stale = now - timedelta(seconds=settings.sweep_after_seconds)
    ahead = now + timedelta(milliseconds=settings.lookahead_ms + 1000)
    restored = index.restore_notifications(
        [(i, attempt, to_ms(now if due < stale else due)) for i, attempt, due in
         store.awaiting(conn, stale, ahead, limit)])
    limit_s = notifications.DELIVERY_TIMEOUT_SECONDS + settings.lost_margin_seconds
    ended = 0
    for notification_id, attempt, _ in store.sending_since(conn, now - timedelta(seconds=limit_s), limit):
        decision = retry.decide(notifications.DELIVERY_RETRY, attempt, False, True, now)
        error = f"lost: executor did not report within {limit_s:g} s"
        status = _STATUS_AFTER[decision.status]
        if store.finish(conn, notification_id, attempt, status, decision.next_attempt_at, None, error):
            ended += 1
            if decision.next_attempt_at is not None:
                index.schedule_notification(notification_id, attempt + 1, to_ms(decision.next_attempt_at))
    if restored or ended:
        logger.warning("swept notifications", extra={"redispatched": restored, "ended": ended})
    return restored, ended


# ---------------------------------------------------------------- the API's part

def job_notifications(scope: Any, job_id: str) -> list[store.NotificationRow]:
    """The tenant's job's last notifications, newest first; NotFoundError for another tenant's job."""
    from tickwork import jobs

    job = jobs.get_job(scope, job_id)
    with scope.db.connection() as conn:
        return store.list_for_job(conn, job.id, notifications.LIST_LIMIT)
