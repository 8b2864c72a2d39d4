"""Deploy-time work CloudFormation asks of the migrations function through a custom resource: migrating
the schema.

Every request is answered before the function's own timeout, failures included
(tickwork.ops.custom_resource). The migration runs with a `lock_timeout` (a DDL
statement queued behind the poller's and executors' transactions would otherwise queue every one of
theirs behind it; it is retried instead, a few times) and a `statement_timeout` that ends it in the
database before the answer is due. All pending migrations apply in one transaction (tickwork.store.migrate.migrate):
a failure or a timeout leaves nothing half-applied.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from aws_lambda_powertools import Logger

from tickwork.ops.custom_resource import Answer, answer
from tickwork.ops.response_url import ResponseHosts
from tickwork.store.migrate import migrate

logger = Logger(child=True)

MIGRATION_RESOURCE_TYPE = "Custom::TickworkSchemaMigration"
# How much earlier than the answer the database ends a statement still running.
STATEMENT_MARGIN_SECONDS = 2.0
# A lock the migration waits for longer than this fails its statement, and the migration is tried again
# after a pause, while the budget lasts: traffic is held up at most this long by a DDL statement's queue.
LOCK_TIMEOUT_SECONDS = 5.0
LOCK_RETRY_PAUSE_SECONDS = 2.0


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


def handle_migration(services: Callable[[], Any], event: Mapping[str, Any], budget: float,
                     hosts: ResponseHosts | None = None) -> dict[str, Any]:
    """The migrations function's request: the schema of `services().db` migrated within `budget`.
    `hosts`: where answers may go (tickwork.ops.custom_resource.answer; the handler leaves the default)."""
    return handle_custom_resource(event, lambda: migrate_schema(services().db, budget), budget, hosts=hosts)


def handle_custom_resource(event: Mapping[str, Any], migrate_now: Callable[[], list[str]], budget: float,
                           http: Any = None, hosts: ResponseHosts | None = None) -> dict[str, Any]:
    """Run the request (Create/Update migrate, Delete keeps the data) and send CloudFormation the outcome
    within `budget` seconds: a migration still running then is answered FAILED (its statement timeout
    ends it in the database, and its transaction applies nothing)."""
    physical_id = event.get("PhysicalResourceId") or f"{event.get('LogicalResourceId')}-schema"
    return answer(event, lambda: Answer(physical_id, _run(event, migrate_now)), budget, physical_id, _reason, http,
                  hosts)


def _run(event: Mapping[str, Any], migrate_now: Callable[[], list[str]]) -> dict[str, str]:
    if event.get("ResourceType") != MIGRATION_RESOURCE_TYPE:
        raise ValueError(f"unknown custom resource type {event.get('ResourceType')!r}")
    if event["RequestType"] == "Delete":
        return {}  # the database outlives the migration resource
    applied = migrate_now()
    logger.info("schema migrated", extra={"applied": applied})
    return {"Applied": ",".join(applied)}


def _reason(exc: BaseException) -> str:
    return f"schema migration failed: {type(exc).__name__}: {exc}"
