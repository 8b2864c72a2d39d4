"""Notifications and auto-pause end to end: real Postgres, Redis, executor, poller, sweeper and HTTP targets.

Runs are fired on a FakeClock; notification attempts are dispatched through the due index by a real
poller tick and delivered by the executor's own steps, so what a target receives is what production sends.
"""
from __future__ import annotations

import json
import threading
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any, Iterator

import boto3
import pytest
from moto import mock_aws
from standardwebhooks.webhooks import Webhook

from tests.conftest import Target
from tests.integration.helpers import due_index, executor_at, insert_job
from tests.support import FakeClock, score_of
from tickwork.dispatch.poller import Poller
from tickwork.dueindex.entries import notification_member
from tickwork.dueindex.index import DueIndex
from tickwork.models import Dispatch
from tickwork.notifications.deliver import deliver
from tickwork.ops.maintenance import run_maintenance
from tickwork.runs.executor import Executor
from tickwork.scope import Scope
from tickwork.store import executions as executions_store
from tickwork.store import jobs as jobs_store
from tickwork.tenant import secrets as tenant_secrets
from tickwork.timeutil import to_ms
from tickwork.wiring import Services

T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)


def _watched_job(services: Services, target: Target, notify_target: Target | None, pause_after: int | None) -> str:
    job_id = insert_job(services, schedule="0 0 1 1 *", next_run_at=T0 + timedelta(days=30),
                        url=target.url + "/hook", retry={"max_attempts": 1})
    notify = None if notify_target is None else {"url": notify_target.url + "/events",
                                                 "on": ["failure", "recovery", "paused"]}
    with services.db.connection() as conn:
        conn.execute("UPDATE jobs SET notify = %s, pause_after_failures = %s WHERE id = %s",
                     (None if notify is None else json.dumps(notify), pause_after, job_id))
    return job_id


def _run_once(services: Services, executor: Executor, job_id: str, at: datetime) -> str:
    """A manual run of the job at `at`, through the executor; returns its status."""
    with services.db.connection() as conn:
        tenant_id = conn.execute("SELECT tenant_id::text FROM jobs WHERE id = %s", (job_id,)).fetchone()[0]
        execution_id = executions_store.insert_manual(conn, tenant_id, job_id, at)
    return executor.run([Dispatch(execution_id, 1, to_ms(at))])[0]


def _dispatched_notifications(services: Services, at: datetime) -> list[Dispatch]:
    """What one poller tick at `at` hands to executors as notification attempts."""
    services.invoker.dispatches.clear()  # type: ignore[union-attr]
    Poller(services).tick(to_ms(at))
    return [d for d in services.invoker.dispatches if d.kind == "notification"]  # type: ignore[union-attr]


def _signing_secret(services: Services, job_id: str) -> str:
    with services.db.connection() as conn:
        tenant_id = conn.execute("SELECT tenant_id::text FROM jobs WHERE id = %s", (job_id,)).fetchone()[0]
    index = DueIndex(services.redis, services.settings.namespace)
    return tenant_secrets.signing_secret(Scope(services.db, index, services.settings, tenant_id, T0, services.keyring))


def _events(target: Target) -> list[dict[str, Any]]:
    return [json.loads(r["body"]) for r in target.requests]


def _rows(services: Services, job_id: str) -> list[tuple[Any, ...]]:
    with services.db.connection() as conn:
        return conn.execute("SELECT type, status, attempt_count, channel FROM notifications WHERE job_id = %s"
                            " ORDER BY created_at, type", (job_id,)).fetchall()


def test_failure_recovery_and_pause_each_arrive_once(services: Services, target: Target, notify_target: Target) -> None:
    job_id = _watched_job(services, target, notify_target, pause_after=2)
    clock = FakeClock(T0)
    executor = executor_at(services, clock)
    sent: list[str] = []
    for step, status in enumerate([500, 200, 500, 500]):
        target.default_status = status
        at = T0 + timedelta(minutes=step)
        clock.at = at
        sent.append(_run_once(services, executor, job_id, at))
        notes = _dispatched_notifications(services, at)
        assert _deliver(executor, notes) == ["delivered"] * len(notes)
        # Delivered twice (a duplicated dispatch): the second finds the attempt already taken.
        assert _deliver(executor, notes) == ["duplicate"] * len(notes)
    assert sent == ["failed", "succeeded", "failed", "failed"]
    events = _events(notify_target)
    assert [e["type"] for e in events] == ["run.failed", "job.recovered", "run.failed", "run.failed", "job.paused"]
    assert len({e["id"] for e in events}) == 5
    secret = _signing_secret(services, job_id)
    for request, event in zip(notify_target.requests, events):
        assert request["headers"]["Tickwork-Run-Id"] == event["id"]  # the stable id a receiver dedupes on
        assert request["headers"]["Tickwork-Event-Type"] == event["type"]
        assert request["headers"]["Content-Type"] == "application/json"
        # Signed like every request, with the event id as the webhook id. Checked with the official library's
        # signer: its verify() also compares the timestamp with the wall clock, and the runs here are at T0.
        assert request["headers"]["webhook-id"] == event["id"]
        stamp = datetime.fromtimestamp(int(request["headers"]["webhook-timestamp"]), timezone.utc)
        assert request["headers"]["webhook-signature"] == Webhook(secret).sign(
            event["id"], stamp, request["body"])
    first = events[0]
    assert (first["job_id"], first["attempts"], first["status_code"], first["error"]) == (job_id, 1, 500, "HTTP 500")
    assert first["scheduled_for"] == "2026-11-30T12:00:00.000Z" and first["occurred_at"] == "2026-11-30T12:00:00.000Z"
    assert events[4]["paused_reason"] == "paused after 2 consecutive failed runs (pause_after_failures: 2)"
    with services.db.connection() as conn:
        (job,) = jobs_store.get_jobs(conn, [job_id])
    assert (job.status, job.next_run_at, job.paused_reason) == ("paused", None, events[4]["paused_reason"])
    assert score_of(due_index(services), f"j:{job_id}") is None
    assert {row[1:] for row in _rows(services, job_id)} == {("delivered", 1, "webhook")}


def test_a_job_without_notify_pauses_and_raises_no_event(services: Services, target: Target) -> None:
    job_id = _watched_job(services, target, None, pause_after=1)
    target.default_status = 500
    executor = executor_at(services, FakeClock(T0))
    assert _run_once(services, executor, job_id, T0) == "failed"
    with services.db.connection() as conn:
        (job,) = jobs_store.get_jobs(conn, [job_id])
    assert job.status == "paused" and job.paused_reason is not None
    assert _rows(services, job_id) == []


def test_events_not_asked_for_are_not_sent(services: Services, target: Target, notify_target: Target) -> None:
    job_id = _watched_job(services, target, notify_target, pause_after=None)
    with services.db.connection() as conn:
        conn.execute("""UPDATE jobs SET notify = jsonb_set(notify, '{on}', '["recovery"]') WHERE id = %s""", (job_id,))
    clock = FakeClock(T0)
    executor = executor_at(services, clock)
    for step, status in enumerate([500, 500, 200, 200]):
        target.default_status, clock.at = status, T0 + timedelta(minutes=step)
        _run_once(services, executor, job_id, clock.at)
        _deliver(executor, _dispatched_notifications(services, clock.at))
    assert [e["type"] for e in _events(notify_target)] == ["job.recovered"]


def test_a_lost_index_write_is_put_back_by_the_sweeper_and_sent_once(
    services: Services, target: Target, notify_target: Target,
) -> None:
    """Breaks the step after the commit: the run's end and its event are in Postgres, the dispatch never
    reached Redis (as when the executor dies there). The sweeper must put it back; it arrives once."""
    job_id = _watched_job(services, target, notify_target, pause_after=None)
    target.default_status = 500
    executor = executor_at(services, FakeClock(T0))
    assert _run_once(services, executor, job_id, T0) == "failed"
    with services.db.connection() as conn:
        (notification_id,) = conn.execute("SELECT id::text FROM notifications").fetchone()
    index = due_index(services)
    services.redis.zrem(index.due_key, notification_member(notification_id, 1))
    assert _dispatched_notifications(services, T0) == []
    later = T0 + timedelta(seconds=services.settings.sweep_after_seconds + 1)
    assert run_maintenance(services, later).notifications_redispatched == 1
    assert run_maintenance(services, later).notifications_redispatched == 0  # already back: not twice
    notes = _dispatched_notifications(services, later)
    assert _deliver(executor, notes) == ["delivered"]
    assert [e["type"] for e in _events(notify_target)] == ["run.failed"]


def test_an_attempt_whose_executor_died_is_retried_under_the_same_event_id(
    services: Services, target: Target, notify_target: Target,
) -> None:
    """Breaks the executor after it started a notification attempt and before it reported: the sweeper
    ends the attempt and queues the next, which delivers the same event (same id) once."""
    job_id = _watched_job(services, target, notify_target, pause_after=None)
    target.default_status = 500
    executor = executor_at(services, FakeClock(T0))
    _run_once(services, executor, job_id, T0)
    (note,) = _dispatched_notifications(services, T0)
    with services.db.connection() as conn:
        from tickwork.store import notifications as store

        started = store.start(conn, note.execution_id, note.attempt)  # the executor that then died
    assert started is not None
    assert _deliver(executor, [note]) == ["duplicate"]
    after = started.attempt_started_at + timedelta(seconds=10 + services.settings.lost_margin_seconds + 1)
    assert run_maintenance(services, after).notifications_lost == 1
    with services.db.connection() as conn:
        due = conn.execute("SELECT next_attempt_at FROM notifications").fetchone()[0]
    notes = _dispatched_notifications(services, max(due, after))
    assert [(d.execution_id, d.attempt) for d in notes] == [(note.execution_id, 2)]
    assert _deliver(executor, notes) == ["delivered"]
    (event,) = _events(notify_target)
    assert event["id"] == note.execution_id == notify_target.requests[0]["headers"]["Tickwork-Run-Id"]
    assert notify_target.requests[0]["headers"]["Tickwork-Attempt"] == "2"


def test_concurrent_duplicate_dispatches_send_once(services: Services, target: Target, notify_target: Target) -> None:
    job_id = _watched_job(services, target, notify_target, pause_after=None)
    target.default_status = 500
    executor = executor_at(services, FakeClock(T0))
    _run_once(services, executor, job_id, T0)
    (note,) = _dispatched_notifications(services, T0)
    results: list[str] = []
    start = threading.Barrier(2)

    def deliver() -> None:
        start.wait()
        results.extend(_deliver(executor_at(services, FakeClock(T0)), [note]))

    threads = [threading.Thread(target=deliver) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == ["delivered", "duplicate"]
    assert len(notify_target.requests) == 1


def test_a_failing_notification_target_is_retried_through_the_index(
    services: Services, target: Target, notify_target: Target,
) -> None:
    job_id = _watched_job(services, target, notify_target, pause_after=None)
    target.default_status = 500
    notify_target.statuses = [503]
    clock = FakeClock(T0)
    executor = executor_at(services, clock)
    _run_once(services, executor, job_id, T0)
    assert _deliver(executor, _dispatched_notifications(services, T0)) == ["pending"]
    with services.db.connection() as conn:
        status, attempts, due, error = conn.execute(
            "SELECT status, attempt_count, next_attempt_at, last_error FROM notifications").fetchone()
    assert (status, attempts, error) == ("pending", 1, "HTTP 503") and T0 <= due <= T0 + timedelta(seconds=10)
    notes = _dispatched_notifications(services, due)
    assert [d.attempt for d in notes] == [2]
    assert _deliver(executor, notes) == ["delivered"]
    assert [r["headers"]["Tickwork-Run-Id"] for r in notify_target.requests] == [notes[0].execution_id] * 2


@pytest.fixture
def sns_queue(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, str, str]]:
    """An SNS topic (moto) with an SQS queue subscribed, to read what was published."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    with mock_aws():
        sns, sqs = boto3.client("sns"), boto3.client("sqs")
        topic = sns.create_topic(Name="OperatorTopic")["TopicArn"]
        queue_url = sqs.create_queue(QueueName="operators")["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn, Attributes={"RawMessageDelivery": "true"})
        yield sns, topic, queue_url


def test_final_failures_of_any_job_are_published_to_the_operator_topic(
    services: Services, target: Target, sns_queue: tuple[Any, str, str],
) -> None:
    sns, topic, queue_url = sns_queue
    svc = replace(services, settings=replace(services.settings, operator_topic_arn=topic), sns=sns)
    job_id = insert_job(svc, schedule="0 0 1 1 *", next_run_at=T0 + timedelta(days=30), url=target.url + "/hook",
                        retry={"max_attempts": 1})  # no notify, no pause: only the deployment-wide event
    executor = executor_at(svc, FakeClock(T0))
    target.default_status = 200
    assert _run_once(svc, executor, job_id, T0) == "succeeded"
    target.default_status = 500
    assert _run_once(svc, executor, job_id, T0 + timedelta(minutes=1)) == "failed"
    notes = _dispatched_notifications(svc, T0 + timedelta(minutes=1))
    assert _deliver(executor, notes) == ["delivered"]
    sqs = boto3.client("sqs")
    messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", [])
    assert [json.loads(m["Body"])["type"] for m in messages] == ["run.failed"]
    published = json.loads(messages[0]["Body"])
    assert (published["job_id"], published["status_code"], published["error"]) == (job_id, 500, "HTTP 500")
    assert _rows(svc, job_id) == [("run.failed", "delivered", 1, "operator")]


def test_operator_failures_of_a_job_are_published_once_a_minute_and_the_rest_summarised(
    services: Services, target: Target, sns_queue: tuple[Any, str, str],
) -> None:
    """A job failing every 10 s: its first failure in a minute is published at once, the later ones of that
    minute in one summary when the minute is over, and the next minute starts again."""
    sns, topic, queue_url = sns_queue
    svc = replace(services, settings=replace(services.settings, operator_topic_arn=topic), sns=sns)
    job_id = insert_job(svc, schedule="0 0 1 1 *", next_run_at=T0 + timedelta(days=30), url=target.url + "/hook",
                        retry={"max_attempts": 1})
    target.default_status = 500
    clock = FakeClock(T0)
    executor = executor_at(svc, clock)
    sqs = boto3.client("sqs")

    def fail_and_publish(at: datetime) -> list[dict[str, Any]]:
        clock.at = at
        assert _run_once(svc, executor, job_id, at) == "failed"
        _deliver(executor, _dispatched_notifications(svc, at))
        return _published(sqs, queue_url)

    assert [m["execution_id"] for m in fail_and_publish(T0)] == [_latest_run(svc, job_id)]
    for seconds in (10, 20, 30):
        assert fail_and_publish(T0 + timedelta(seconds=seconds)) == []
    last = _latest_run(svc, job_id)
    assert _deliver(executor, _dispatched_notifications(svc, T0 + timedelta(seconds=65))) == ["delivered"]
    (summary,) = _published(sqs, queue_url)
    assert (summary["summary"], summary["failures"], summary["execution_id"]) == (True, 3, last)
    assert (summary["job_id"], summary["minute"]) == (job_id, "2026-11-30T12:00:00.000Z")
    (first_next_minute,) = fail_and_publish(T0 + timedelta(seconds=70))
    assert first_next_minute["minute"] == "2026-11-30T12:01:00.000Z" and "summary" not in first_next_minute


def _published(sqs: Any, queue_url: str) -> list[dict[str, Any]]:
    """What the operator topic published since the last call (read from its subscribed queue)."""
    messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", [])
    for message in messages:
        sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
    return [json.loads(m["Body"]) for m in messages]


def _latest_run(services: Services, job_id: str) -> str:
    with services.db.connection() as conn:
        return str(conn.execute("SELECT id::text FROM executions WHERE job_id = %s ORDER BY scheduled_for DESC LIMIT 1",
                                (job_id,)).fetchone()[0])


def test_a_run_the_sweeper_ends_lost_notifies_its_failure(
    services: Services, target: Target, notify_target: Target,
) -> None:
    """Breaks the executor after it started the run: the sweeper ends it `lost`, a final failure."""
    job_id = _watched_job(services, target, notify_target, pause_after=1)
    with services.db.connection() as conn:
        tenant_id = conn.execute("SELECT tenant_id::text FROM jobs WHERE id = %s", (job_id,)).fetchone()[0]
        execution_id = executions_store.insert_manual(conn, tenant_id, job_id, T0)
        started = executions_store.start_unguarded(conn, execution_id, 1)
    assert started is not None and started.attempt_started_at is not None
    after = started.attempt_started_at + timedelta(seconds=5 + services.settings.lost_margin_seconds + 1)
    assert run_maintenance(services, after).lost == 1
    executor = executor_at(services, FakeClock(after))
    notes = _dispatched_notifications(services, after)
    assert _deliver(executor, notes) == ["delivered", "delivered"]
    events = _events(notify_target)
    assert [e["type"] for e in events] == ["run.failed", "job.paused"]
    assert events[0]["execution_id"] == execution_id and events[0]["error"].startswith("lost: executor did not report")


def test_finished_notifications_are_pruned_with_the_retention_pending_ones_kept(
    services: Services, target: Target, notify_target: Target,
) -> None:
    job_id = _watched_job(services, target, notify_target, pause_after=None)
    target.default_status = 500
    clock = FakeClock(T0)
    executor = executor_at(services, clock)
    _run_once(services, executor, job_id, T0)
    _deliver(executor, _dispatched_notifications(services, T0))
    clock.at = T0 + timedelta(minutes=1)
    _run_once(services, executor, job_id, clock.at)  # its event stays pending
    with services.db.connection() as conn:
        created = conn.execute("SELECT max(created_at) FROM notifications").fetchone()[0]
    later = created + timedelta(days=services.settings.retention_days, seconds=1)
    assert run_maintenance(services, later).notifications_pruned == 1
    assert [row[1] for row in _rows(services, job_id)] == ["pending"]


def _deliver(executor: Executor, notes: list[Dispatch]) -> list[str]:
    """The executor's notification delivery, with its clock and jitter."""
    return deliver(executor, executor.svc, executor.clock, executor.uniform, notes)
