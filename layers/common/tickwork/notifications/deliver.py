"""Delivering notification attempts: a job's `notify.url` through the same steps as a run (the SSRF check,
the request built and signed alike), an operator event to the deployment's SNS topic. A group's attempts go
concurrently, bounded per tenant, so one tenant's slow or silent receiver delays only its own.
"""
from __future__ import annotations

import itertools
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence, TypeVar

from aws_lambda_powertools import Logger

from tickwork.dueindex.index import DueIndex
from tickwork.interfaces import RunSteps
from tickwork.models import Dispatch
from tickwork.outcome import Failure, FailureKind, Outcome
from tickwork.rules import notifications as events
from tickwork.rules import retry
from tickwork.rules.notifications import OPERATOR
from tickwork.settings import Settings
from tickwork.store import notifications as store
from tickwork.timeutil import to_ms
from tickwork.vocab import NotEnded, NotStarted, RunStatus

logger = Logger(child=True)

# A notification's status after a delivery decision (the sweeper's too).
STATUS_AFTER = {RunStatus.SUCCEEDED: "delivered", RunStatus.RETRYING: "pending", RunStatus.FAILED: "failed"}
# One tenant's notifications of a group in flight at once: a notify.url that never answers holds this many
# threads until its timeout (events.DELIVERY_TIMEOUT_SECONDS), and nobody else's notification waits for it.
PER_TENANT_IN_FLIGHT = 4
# Threads for a group's notifications (the executor's group is at most the poller's batch).
MAX_IN_FLIGHT = 32
T = TypeVar("T")


class Clients(Protocol):
    """What delivering uses of its execution environment's clients (tickwork.wiring.Services has them)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def db(self) -> Any: ...  # psycopg_pool.ConnectionPool
    @property
    def index(self) -> DueIndex: ...
    @property
    def sns(self) -> Any: ...  # boto3 SNS client, or None


def deliver(steps: RunSteps, clients: Clients, clock: Callable[[], float], uniform: retry.Random,
            dispatches: Sequence[Dispatch]) -> list[str]:
    """Send the notification attempts dispatched, at once, each tenant's in at most PER_TENANT_IN_FLIGHT
    lanes (one after the other within a lane, a job's in one); returns each one's status, or 'duplicate',
    in their order. `clock` and `uniform` are the executor's (its retries are timed and jittered alike).
    A connection is held only to start and to finish an attempt, never while it is sent."""
    if not dispatches:
        return []
    with clients.db.connection() as conn:
        owners = store.owners(conn, [dispatch.execution_id for dispatch in dispatches])
    outcomes: list[str] = [NotStarted.DUPLICATE] * len(dispatches)

    def run_lane(lane: list[int]) -> None:
        for position in lane:
            outcomes[position] = _deliver_one(steps, clients, clock, uniform, dispatches[position])

    lanes = tenant_lanes(range(len(dispatches)), lambda i: owners.get(dispatches[i].execution_id, ("", "")),
                         PER_TENANT_IN_FLIGHT)
    if len(lanes) == 1:
        run_lane(lanes[0])
        return outcomes
    with ThreadPoolExecutor(max_workers=min(MAX_IN_FLIGHT, len(lanes))) as pool:
        for future in [pool.submit(run_lane, lane) for lane in lanes]:
            future.result()
    return outcomes


def tenant_lanes(items: Iterable[T], owner_of: Callable[[T], tuple[str, str]], per_tenant: int) -> list[list[T]]:
    """`items` in lanes, in their order within each: a tenant's (the first of `owner_of`'s pair) over at most
    `per_tenant` lanes, one job's (the second) all in one lane, so a job's events keep the order they were
    raised in. The tenants' first lanes come first, then their second ones..., so a pool with fewer threads
    than lanes starts every tenant's before a second one of any."""
    jobs: dict[str, dict[str, int]] = {}  # tenant -> job -> its lane among the tenant's
    lanes: dict[str, list[list[T]]] = {}
    for item in items:
        tenant, job = owner_of(item)
        own, placed = lanes.setdefault(tenant, []), jobs.setdefault(tenant, {})
        if job not in placed:
            placed[job] = len(placed) % per_tenant
            if placed[job] == len(own):
                own.append([])
        own[placed[job]].append(item)
    return [lane for rank in itertools.zip_longest(*lanes.values()) for lane in rank if lane is not None]


def _deliver_one(steps: RunSteps, clients: Clients, clock: Callable[[], float], uniform: retry.Random,
                 dispatch: Dispatch) -> str:
    with clients.db.connection() as conn:
        started = store.start(conn, dispatch.execution_id, dispatch.attempt)
    if started is None:
        return NotStarted.DUPLICATE
    if started.channel == OPERATOR:
        outcome = publish(clients.sns, clients.settings.operator_topic_arn, started)
    else:
        outcome = _send(steps, started)
    now = datetime.fromtimestamp(clock(), tz=timezone.utc)
    decision = retry.decide(events.DELIVERY_RETRY, started.attempt, outcome.succeeded, outcome.retryable, now,
                            outcome.retry_after_seconds, uniform)
    status = STATUS_AFTER[decision.status]
    with clients.db.connection() as conn:
        ours = store.finish(conn, started.id, started.attempt, status, decision.next_attempt_at, outcome.status_code,
                            outcome.error)
    if ours and decision.next_attempt_at is not None:
        clients.index.schedule_notification(started.id, started.attempt + 1, to_ms(decision.next_attempt_at))
    logger.info("notification attempt finished", extra={
        "notification_id": started.id, "job_id": started.job_id, "attempt": started.attempt, "status": status,
        "channel": started.channel, "status_code": outcome.status_code, "error": outcome.error})
    return status if ours else NotEnded.SUPERSEDED


def _send(steps: RunSteps, started: store.Delivery) -> Outcome:
    """Through the executor's own steps: the SSRF check, the same request building (and signing) as runs."""
    run = events.as_run(started.id, started.tenant_id, started.job_id, started.url or "", started.payload,
                        started.attempt, started.created_at, started.attempt_started_at)
    prepared = steps.prepare(run)
    steps.fire(prepared)
    return prepared.complete()


def publish(sns: Any, topic: str, started: store.Delivery) -> Outcome:
    """An operator event to the deployment's SNS topic (`sns`: its boto3 client, None when there is none)."""
    if sns is None or not topic:
        return Outcome.failed(Failure(FailureKind.REFUSED, "refused: no operator topic is configured"))
    begun = time.monotonic()
    try:
        sns.publish(
            TopicArn=topic, Subject=subject(started.job_id, started.payload),
            Message=events.body(started.payload),
            MessageAttributes={"type": {"DataType": "String", "StringValue": str(started.payload.get("type"))}},
        )
    except Exception as exc:  # botocore's errors: kept by kind only, like every delivery error
        code = getattr(exc, "response", {}).get("Error", {}).get("Code") or type(exc).__name__
        return Outcome.failed(Failure(FailureKind.SERVICE_ERROR, f"publish failed: {code}"), _ms_since(begun))
    return Outcome(None, None, None, _ms_since(begun), failure=None)


def subject(job_id: str, payload: Mapping[str, Any]) -> str:
    """The SNS subject (under 100 characters): a failure, or the summary of a job's later ones in a minute
    (the body says which minute)."""
    if payload.get("summary"):
        return f"Tickwork: job {job_id}: {payload.get('failures')} more failed runs in a minute"
    return f"Tickwork: a run of job {job_id} failed"


def _ms_since(begun: float) -> int:
    return int((time.monotonic() - begun) * 1000)

