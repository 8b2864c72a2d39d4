"""Deploy-time work CloudFormation asks of the migrations function through a custom resource: migrating
the schema.

Every request is answered before the function's own timeout, failures included
(tickwork.ops.custom_resource). The migration (tickwork.store.migrate.migrate) applies each pending migration
on its own, with the runner's lock timeout (a DDL statement queued behind the poller's and executors'
transactions would otherwise queue every one of theirs behind it; the migration is tried again instead,
while the budget lasts), and a `statement_timeout` that ends a statement in the database before the answer
is due. A run cut short keeps the migrations it finished; the next deploy goes on from the one it was in.
"""
from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Callable, Mapping

from aws_lambda_powertools import Logger

from tickwork.ops.custom_resource import Answer, answer
from tickwork.ops.response_url import ResponseHosts
from tickwork.store.migrate import LockWaits, migrate

logger = Logger(child=True)

MIGRATION_RESOURCE_TYPE = "Custom::TickworkSchemaMigration"
# How much earlier than the answer the database ends a statement still running.
STATEMENT_MARGIN_SECONDS = 2.0
# The deploy tries a migration that waited too long for a lock again for as long as its budget lasts.
DEPLOY_LOCK_RETRIES = 1000


def migrate_schema(pool: Any, budget: float, waits: LockWaits = LockWaits()) -> list[str]:
    """Apply pending migrations within `budget` seconds (connection wait included), trying those that waited
    too long for a lock again while the budget lasts; raises when it runs out or a migration fails."""
    left = budget - STATEMENT_MARGIN_SECONDS
    if left <= 0:
        raise TimeoutError(f"no time left to migrate within {budget:g} s")
    ends = time.monotonic() + left
    with pool.connection(timeout=left) as conn:
        conn.execute(f"SET statement_timeout = {max(1, int((ends - time.monotonic()) * 1000))}")
        try:
            applied = migrate(conn, replace(waits, retries=DEPLOY_LOCK_RETRIES), deadline=ends)
        finally:
            if not (conn.closed or conn.broken):  # a broken one is discarded by the pool
                conn.execute("RESET statement_timeout")
    return applied


def handle_migration(services: Callable[[], Any], event: Mapping[str, Any], budget: float,
                     hosts: ResponseHosts | None = None) -> dict[str, Any]:
    """The migrations function's request: the schema of `services().db` migrated within `budget`.
    `hosts`: where answers may go (tickwork.ops.custom_resource.answer; the handler leaves the default)."""
    svc = services()
    return handle_custom_resource(event, lambda: migrate_schema(svc.db, budget), budget, hosts=hosts,
                                  code_version=svc.settings.code_version)


def handle_custom_resource(event: Mapping[str, Any], migrate_now: Callable[[], list[str]], budget: float,
                           http: Any = None, hosts: ResponseHosts | None = None,
                           code_version: str = "") -> dict[str, Any]:
    """Run the request (Create/Update migrate, Delete keeps the data) and send CloudFormation the outcome
    within `budget` seconds: a migration still running then is answered FAILED (its statement timeout
    ends it in the database, and its transaction applies nothing). `code_version`: the layer version this
    code came in (Settings.code_version)."""
    physical_id = event.get("PhysicalResourceId") or f"{event.get('LogicalResourceId')}-schema"
    return answer(event, lambda: Answer(physical_id, _run(event, migrate_now, code_version)), budget, physical_id,
                  _reason, http, hosts)


def _run(event: Mapping[str, Any], migrate_now: Callable[[], list[str]], code_version: str) -> dict[str, str]:
    if event.get("ResourceType") != MIGRATION_RESOURCE_TYPE:
        raise ValueError(f"unknown custom resource type {event.get('ResourceType')!r}")
    if event["RequestType"] == "Delete":
        return {}  # the database outlives the migration resource
    asked = str(event.get("ResourceProperties", {}).get("CodeVersion", ""))
    direction = _layer_number(asked) - _layer_number(code_version) if asked and code_version else 0
    if direction < 0:
        # A failed update rolling back: this resource goes back to the release before, whose code runs on the
        # schema as it is (docs/deploy.md, "Releases and upgrades"). Migrating again would retry what failed.
        logger.info("schema kept as it is: the stack is rolling back", extra={"to": asked, "code": code_version})
        return {"Applied": ""}
    if direction > 0:
        raise RuntimeError(f"this environment runs {code_version}, older than the {asked} the deploy asks for")
    applied = migrate_now()
    logger.info("schema migrated", extra={"applied": applied})
    return {"Applied": ",".join(applied)}


def _layer_number(arn: str) -> int:
    """The version of a layer version's ARN (`arn:aws:lambda:...:layer:name:7`): they only grow."""
    number = arn.rsplit(":", 1)[-1]
    return int(number) if number.isdigit() else 0


def _reason(exc: BaseException) -> str:
    return f"schema migration failed: {type(exc).__name__}: {exc}"
