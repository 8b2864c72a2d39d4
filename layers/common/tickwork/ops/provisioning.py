"""Deploy-time work CloudFormation asks of the migrations function through a custom resource: migrating
the schema.

CloudFormation waits for a PUT to the event's ResponseURL, so every request is answered before the
function's own timeout, failures included: a raised error, or a Lambda killed at its timeout, would leave
the deploy hanging until the resource's ServiceTimeout. The migration runs with a `lock_timeout` (a DDL
statement queued behind the poller's and executors' transactions would otherwise queue every one of
theirs behind it; it is retried instead, a few times) and a `statement_timeout` that ends it in the
database before the answer is due. All pending migrations apply in one transaction (tickwork.store.migrate.migrate):
a failure or a timeout leaves nothing half-applied.
"""
from __future__ import annotations

import functools
import json
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from aws_lambda_powertools import Logger

from tickwork.store.migrate import migrate

logger = Logger(child=True)

MIGRATION_RESOURCE_TYPE = "Custom::TickworkSchemaMigration"
# CloudFormation refuses responses over 4 KiB; the reason is the only part of ours that can grow.
MAX_REASON_CHARS = 1000
# Kept back from the Lambda's remaining time: to send the response after the migration's statement
# timeout, and for the PUT itself (three tries of up to 5 s would be more than a healthy network needs).
RESPONSE_MARGIN_SECONDS = 10.0
# How much earlier than the answer the database ends a statement still running.
STATEMENT_MARGIN_SECONDS = 2.0
# Without a Lambda context (tests, a manual run): the time the work may take.
DEFAULT_BUDGET_SECONDS = 60.0
# A lock the migration waits for longer than this fails its statement, and the migration is tried again
# after a pause, while the budget lasts: traffic is held up at most this long by a DDL statement's queue.
LOCK_TIMEOUT_SECONDS = 5.0
LOCK_RETRY_PAUSE_SECONDS = 2.0


@functools.cache
def _http() -> Any:
    """Made on the first deploy-time event only."""
    import urllib3

    return urllib3.PoolManager(retries=urllib3.Retry(total=3, backoff_factor=0.5), timeout=urllib3.Timeout(total=5.0))


def is_custom_resource_event(event: Mapping[str, Any]) -> bool:
    return "RequestType" in event and "ResponseURL" in event


def budget_seconds(context: Any) -> float:
    """How long the work may take and still leave time to answer before the Lambda's timeout."""
    if context is None:
        return DEFAULT_BUDGET_SECONDS
    return max(1.0, context.get_remaining_time_in_millis() / 1000 - RESPONSE_MARGIN_SECONDS)


@dataclass(frozen=True)
class MigrationLimits:
    lock_timeout: float = LOCK_TIMEOUT_SECONDS
    retry_pause: float = LOCK_RETRY_PAUSE_SECONDS


def migrate_schema(pool: Any, budget: float, limits: MigrationLimits = MigrationLimits()) -> list[str]:
    """Apply pending migrations within `budget` seconds (connection wait included), retrying those that
    waited too long for a lock; raises when the budget runs out or a migration fails otherwise."""
    from psycopg import errors

    ends = time.monotonic() + budget
    while True:
        left = ends - time.monotonic() - STATEMENT_MARGIN_SECONDS
        if left <= 0:
            raise TimeoutError(f"no time left to migrate within {budget:g} s")
        try:
            with pool.connection(timeout=left) as conn:
                return _migrate_bounded(conn, left, limits.lock_timeout)
        except errors.LockNotAvailable:
            if ends - time.monotonic() < limits.retry_pause + STATEMENT_MARGIN_SECONDS + limits.lock_timeout:
                raise
            logger.warning("schema migration waited too long for a lock: trying again",
                           extra={"lock_timeout_seconds": limits.lock_timeout})
            time.sleep(limits.retry_pause)


def _migrate_bounded(conn: Any, left: float, lock_timeout: float) -> list[str]:
    """On a pool connection (autocommit: the SETs hold for the session, migrate's transaction is its own)."""
    conn.execute(f"SET lock_timeout = {int(lock_timeout * 1000)}")
    conn.execute(f"SET statement_timeout = {max(1, int(left * 1000))}")
    try:
        return migrate(conn)
    finally:
        if not (conn.closed or conn.broken):  # a broken one is discarded by the pool
            conn.execute("RESET lock_timeout")
            conn.execute("RESET statement_timeout")


def handle_custom_resource(event: Mapping[str, Any], migrate_now: Callable[[], list[str]], budget: float,
                           http: Any = None) -> dict[str, Any]:
    """Run the request (Create/Update migrate, Delete keeps the data) and send CloudFormation the outcome
    within `budget` seconds: a migration still running then is answered FAILED (its statement timeout
    ends it in the database, and its transaction applies nothing)."""
    physical_id = event.get("PhysicalResourceId") or f"{event['LogicalResourceId']}-schema"
    outcome: dict[str, Any] = {}
    worker = threading.Thread(target=_run_into, args=(event, migrate_now, outcome), name="migration", daemon=True)
    worker.start()
    worker.join(budget)
    if "data" in outcome:
        response = _response(event, physical_id, "SUCCESS", "", outcome["data"])
    else:
        error = outcome.get("error") or TimeoutError(f"did not finish within {budget:g} s")
        logger.error("custom resource request failed", extra={"request_type": event.get("RequestType"),
                                                               "error": _reason(error)})
        response = _response(event, physical_id, "FAILED", _reason(error), {})
    _send(http or _http(), str(event["ResponseURL"]), response)
    return response


def _run_into(event: Mapping[str, Any], migrate_now: Callable[[], list[str]], outcome: dict[str, Any]) -> None:
    try:
        outcome["data"] = _run(event, migrate_now)
    except Exception as exc:  # every failure must reach CloudFormation, whatever raised it
        outcome["error"] = exc


def _run(event: Mapping[str, Any], migrate_now: Callable[[], list[str]]) -> dict[str, str]:
    if event.get("ResourceType") != MIGRATION_RESOURCE_TYPE:
        raise ValueError(f"unknown custom resource type {event.get('ResourceType')!r}")
    if event["RequestType"] == "Delete":
        return {}  # the database outlives the migration resource
    applied = migrate_now()
    logger.info("schema migrated", extra={"applied": applied})
    return {"Applied": ",".join(applied)}


def _reason(exc: BaseException) -> str:
    return f"schema migration failed: {type(exc).__name__}: {exc}"[:MAX_REASON_CHARS]


def _response(event: Mapping[str, Any], physical_id: str, status: str, reason: str,
              data: dict[str, str]) -> dict[str, Any]:
    return {
        "Status": status,
        "Reason": reason or "see the migrations function's log",
        "PhysicalResourceId": physical_id,
        "StackId": event["StackId"],
        "RequestId": event["RequestId"],
        "LogicalResourceId": event["LogicalResourceId"],
        "Data": data,
    }


def _send(http: Any, url: str, response: dict[str, Any]) -> None:
    # The URL is a presigned S3 PUT signed without a content type: send none.
    reply = http.request("PUT", url, body=json.dumps(response).encode(), headers={"content-type": ""})
    if reply.status >= 300:
        logger.error("CloudFormation did not take the response", extra={"status": reply.status})
