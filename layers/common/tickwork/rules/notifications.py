"""Failure notifications and auto-pause, decided without I/O.

A job with `notify` ({"url", "on": ["failure", "recovery", "paused"]}) or `pause_after_failures` is
watched: when one of its runs ends (succeeded, or finally failed) the executor locks the job's counters,
`judge` says what the end means (events to send, the job paused), and both are written in the same
transaction as the run's final state. Each event is a row (tickwork.store.notifications) delivered by a
dispatch of its own through the due index (`n:<id>:<attempt>`), so the executor never waits for a
notification target, and retried like a run: at-least-once, with the event id stable across attempts.

Deployment-wide, every final failure of any job is also an `operator` event for the stack's SNS topic when
one is configured (OPERATOR_TOPIC_ARN), through the same rows and dispatches, aggregated per job and minute:
the first failure of a job in a minute is published at once, the later ones of that minute are counted into
one summary published when the minute is over (at most two messages a job a minute, however often it fails).
"""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Mapping

from tickwork.models import StartedExecution
from tickwork.rules.retry import RetryPolicy
from tickwork.timeutil import rfc3339
from tickwork.vocab import Jitter, JobStatus

ON_CHOICES = ("failure", "recovery", "paused")
EVENT_TYPES = {"failure": "run.failed", "recovery": "job.recovered", "paused": "job.paused"}
WEBHOOK, OPERATOR = "webhook", "operator"
# Ids of events are derived from what they are about: an end recorded twice is the same event.
_EVENT_NAMESPACE = uuid.UUID("6f1d3c2e-5b8a-4f0e-9a47-2c1e8b7d9f30")
# A notification target gets a short timeout: it is a webhook receiver, not a job.
DELIVERY_TIMEOUT_SECONDS = 10
# About an hour of attempts (10 s, 20 s, ... capped at 15 min, spread by full jitter) before giving up.
DELIVERY_RETRY = RetryPolicy(strategy="exponential", max_attempts=8, delay_seconds=10, jitter=Jitter.FULL,
                             max_delay_seconds=900, past_next_run=True)
# Notification history the API shows per job.
LIST_LIMIT = 100
# A job's operator summary for a minute leaves this long after the minute began: the minute is over, with a
# few seconds for a failure recorded at its very end by an executor whose clock is a little behind.
SUMMARY_AFTER = timedelta(seconds=65)


@dataclass(frozen=True)
class WatchState:
    """A watched job's counters as locked for the run's end."""

    job_id: str
    tenant_id: str
    status: str
    notify: dict[str, Any] | None
    pause_after_failures: int | None
    consecutive_failures: int
    failing: bool


@dataclass(frozen=True)
class RunEnd:
    """How a run ended, as its events tell it."""

    execution_id: str
    job_id: str
    tenant_id: str
    scheduled_for: datetime
    attempts: int
    succeeded: bool
    error: str | None
    status_code: int | None


@dataclass(frozen=True)
class Event:
    id: str
    tenant_id: str
    job_id: str
    execution_id: str
    channel: str  # webhook (the job's notify.url) or operator (the SNS topic)
    type: str
    url: str | None
    payload: dict[str, Any]


@dataclass(frozen=True)
class Verdict:
    state: WatchState
    paused_reason: str | None  # set when this end pauses the job
    events: list[Event]


def wants(notify: Mapping[str, Any] | None, what: str) -> bool:
    return notify is not None and what in notify.get("on", ON_CHOICES)


def judge(state: WatchState, end: RunEnd, now: datetime) -> Verdict:
    """What a watched job's run ending means: its new counters, whether it pauses, the events to send."""
    if end.succeeded:
        events = [event(end, WEBHOOK, "job.recovered", state.notify, now)] if state.failing and wants(
            state.notify, "recovery") else []
        return Verdict(replace(state, consecutive_failures=0, failing=False), None, events)
    count = state.consecutive_failures + 1
    new = replace(state, consecutive_failures=count, failing=True)
    events = [event(end, WEBHOOK, "run.failed", state.notify, now)] if wants(state.notify, "failure") else []
    limit = state.pause_after_failures
    if limit is None or count < limit or state.status != JobStatus.ACTIVE:
        return Verdict(new, None, events)
    reason = f"paused after {count} consecutive failed runs (pause_after_failures: {limit})"
    if wants(state.notify, "paused"):
        events.append(event(end, WEBHOOK, "job.paused", state.notify, now, {"paused_reason": reason}))
    return Verdict(replace(new, status=JobStatus.PAUSED), reason, events)


def operator_event(end: RunEnd, now: datetime) -> Event:
    """The failure as the operator topic's first message about its job in the minute of `now`: one id per
    job and minute, so a later failure in that minute finds it taken and goes to `operator_summary`."""
    minute = now.replace(second=0, microsecond=0)
    first = event(end, OPERATOR, "run.failed", None, now, {"minute": rfc3339(minute)})
    return _with_id(first, f"{end.job_id}:{OPERATOR}:{rfc3339(minute)}")


def operator_summary(end: RunEnd, now: datetime) -> tuple[Event, datetime]:
    """The failures of a job after the first in the minute of `now`, told once when the minute is over:
    the latest, with `failures` counting them (the store adds each to the count). Returns it and when it is
    published."""
    minute = now.replace(second=0, microsecond=0)
    latest = event(end, OPERATOR, "run.failed", None, now, {"minute": rfc3339(minute), "summary": True, "failures": 1})
    return _with_id(latest, f"{end.job_id}:{OPERATOR}-summary:{rfc3339(minute)}"), minute + SUMMARY_AFTER


def _with_id(raised: Event, key: str) -> Event:
    event_id = str(uuid.uuid5(_EVENT_NAMESPACE, key))
    return replace(raised, id=event_id, payload={**raised.payload, "id": event_id})


def event(
    end: RunEnd, channel: str, kind: str, notify: Mapping[str, Any] | None, now: datetime,
    extra: Mapping[str, Any] | None = None,
) -> Event:
    event_id = str(uuid.uuid5(_EVENT_NAMESPACE, f"{end.execution_id}:{channel}:{kind}"))
    payload = {
        "id": event_id, "type": kind, "job_id": end.job_id, "execution_id": end.execution_id,
        "scheduled_for": rfc3339(end.scheduled_for), "attempts": end.attempts, "error": end.error,
        "status_code": end.status_code, "occurred_at": rfc3339(now), **(extra or {}),
    }
    url = None if notify is None else str(notify["url"])
    return Event(event_id, end.tenant_id, end.job_id, end.execution_id, channel, kind, url, payload)


def run_end(run: StartedExecution, succeeded: bool, error: str | None, status_code: int | None) -> RunEnd:
    return RunEnd(run.id, run.job_id, run.tenant_id, run.scheduled_for, run.attempt, succeeded, error, status_code)


def body(payload: Mapping[str, Any]) -> str:
    """The exact text sent, the same on every attempt."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"))


def as_run(
    notification_id: str, tenant_id: str, job_id: str, url: str, payload: Mapping[str, Any], attempt: int,
    occurred_at: datetime, attempt_started_at: datetime | None,
) -> StartedExecution:
    """A notification attempt as the request type runs use, so it is prepared, checked (SSRF), signed
    and sent by the same path: the event id is its run id and its webhook-id (stable across attempts, for
    dedupe)."""
    headers = {"Content-Type": "application/json", "Tickwork-Event-Type": str(payload.get("type"))}
    request = {"method": "POST", "url": url, "headers": headers,
               "body": body(payload), "timeout_seconds": DELIVERY_TIMEOUT_SECONDS}
    return StartedExecution(notification_id, job_id, tenant_id, occurred_at, attempt, request, {},
                            attempt_started_at=attempt_started_at, message_id=notification_id)
