"""The schema migration the deploy runs: the migrations function answers CloudFormation's custom-resource
event (events/migrations_create.json), migrating the real Postgres, and PUTs the response to the
ResponseURL, played by a local HTTP server, on every path before its own timeout."""
from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any, Callable, Iterator

import psycopg
import pytest

from tests.conftest import RecordingInvoker, Target, fresh_schema
from tests.integration.ops.cloudformation import FakeContext, cfn_event, cfn_responses
from tickwork.ops.custom_resource import budget_seconds
from tickwork.ops.provisioning import handle_migration
from tickwork.ops.response_url import ResponseHosts
from tickwork.settings import Settings
from tickwork.wiring import Services, build_services, configure, services

Handler = Callable[[str], Callable[[dict[str, Any], Any], Any]]
Migrations = Callable[[dict[str, Any], Any], dict[str, Any]]


@pytest.fixture
def empty_schema(servers: Any) -> Iterator[str]:
    """A database URL whose schema has never been migrated, as a new stack's database."""
    with fresh_schema(servers.database_url) as url:
        yield url


@pytest.fixture
def fresh_services(servers: Any, empty_schema: str) -> Iterator[Services]:
    settings = Settings(database_url=empty_schema, redis_url=servers.redis_url, namespace=f"tw-{uuid.uuid4().hex[:8]}")
    svc = build_services(settings, invoker=RecordingInvoker())
    configure(svc)
    yield svc
    configure(None)
    svc.close()


@pytest.fixture
def migrations(target: Target) -> Migrations:
    """The migrations function as its handler runs it (functions/migrations), answering the local ResponseURL
    as well as CloudFormation's (the deployed handler answers only CloudFormation's: test_a_forged_...)."""
    hosts = ResponseHosts(also=(target.url,))
    return lambda event, context: handle_migration(services, event, budget_seconds(context), hosts)


def _event(target: Target, request_type: str, physical_id: str | None = None) -> dict[str, Any]:
    return cfn_event("migrations_create.json", target, request_type, physical_id)


def _tables(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")
        return {row[0] for row in rows}


def test_create_migrates_the_schema_and_reports_success(
    fresh_services: Services, empty_schema: str, migrations: Migrations, target: Target
) -> None:
    event = _event(target, "Create")
    migrations(event, None)
    (response,) = cfn_responses(target)
    assert response["Status"] == "SUCCESS", response
    assert {k: response[k] for k in ("StackId", "RequestId", "LogicalResourceId")} == {
        k: event[k] for k in ("StackId", "RequestId", "LogicalResourceId")}
    assert response["PhysicalResourceId"]
    assert response["Data"]["Applied"].startswith("0001_init.sql")
    assert {"tenants", "api_keys", "jobs", "executions", "schema_migrations"} <= _tables(empty_schema)


def test_an_update_is_idempotent_and_keeps_the_physical_id(
    fresh_services: Services, migrations: Migrations, target: Target
) -> None:
    migrations(_event(target, "Create"), None)
    physical_id = cfn_responses(target)[0]["PhysicalResourceId"]
    migrations(_event(target, "Update", physical_id), None)
    migrations(_event(target, "Update", physical_id), None)
    first, *updates = cfn_responses(target)
    assert [u["Status"] for u in updates] == ["SUCCESS", "SUCCESS"]
    assert [u["Data"]["Applied"] for u in updates] == ["", ""]
    assert {u["PhysicalResourceId"] for u in updates} == {physical_id}


def test_delete_keeps_the_schema(fresh_services: Services, empty_schema: str, migrations: Migrations,
                                 target: Target) -> None:
    migrations(_event(target, "Create"), None)
    physical_id = cfn_responses(target)[0]["PhysicalResourceId"]
    migrations(_event(target, "Delete", physical_id), None)
    assert cfn_responses(target)[1]["Status"] == "SUCCESS"
    assert cfn_responses(target)[1]["PhysicalResourceId"] == physical_id
    assert "jobs" in _tables(empty_schema)


def test_a_failed_migration_fails_the_deploy_with_the_reason(
    fresh_services: Services, empty_schema: str, migrations: Migrations, target: Target
) -> None:
    with psycopg.connect(empty_schema, autocommit=True) as conn:
        conn.execute("CREATE TABLE tenants (squatter int)")  # a table the first migration wants to create
    result = migrations(_event(target, "Create"), None)
    (response,) = cfn_responses(target)
    assert response["Status"] == "FAILED"
    assert "schema migration failed" in response["Reason"] and 'relation "tenants" already exists' in response["Reason"]
    assert result["Status"] == "FAILED"
    # Nothing half-applied: a failed migration rolls back whole (the runner's own table stays, empty).
    assert _tables(empty_schema) == {"tenants", "schema_migrations"}
    # A failed create is rolled back with a Delete of the id it answered with, which must succeed.
    migrations(_event(target, "Delete", response["PhysicalResourceId"]), None)
    assert cfn_responses(target)[1]["Status"] == "SUCCESS"


def test_an_unreachable_database_fails_the_deploy_instead_of_hanging(
    servers: Any, migrations: Migrations, target: Target
) -> None:
    with socket_closed_port() as port:
        settings = Settings(database_url=f"postgresql://tickwork:pw-not-logged@127.0.0.1:{port}/tickwork",
                            redis_url=servers.redis_url)
        svc = build_services(settings, invoker=RecordingInvoker())
        configure(svc)
        try:
            migrations(_event(target, "Create"), FakeContext(remaining_ms=16_000))
        finally:
            configure(None)
            svc.close()
    (response,) = cfn_responses(target)
    assert response["Status"] == "FAILED" and "schema migration failed" in response["Reason"]
    assert "pw-not-logged" not in json.dumps(response)


def test_an_unknown_resource_type_is_refused(fresh_services: Services, empty_schema: str, migrations: Migrations,
                                             target: Target) -> None:
    event = _event(target, "Create")
    event["ResourceType"] = "Custom::Something"
    migrations(event, None)
    (response,) = cfn_responses(target)
    assert response["Status"] == "FAILED" and "Custom::Something" in response["Reason"]
    assert "jobs" not in _tables(empty_schema)


def test_a_migration_waiting_on_a_lock_is_answered_failed_before_the_function_times_out(
    fresh_services: Services, empty_schema: str, migrations: Migrations, target: Target,
) -> None:
    """Break: another session holds the lock the migration needs (here the migrations' own advisory
    lock, as a second deploy would; a table lock behind a long transaction is the same wait). Must hold:
    the wait is cut by lock_timeout, and CloudFormation gets FAILED, saying so, before the function's
    timeout; nothing is applied. Once the lock is free, the next update migrates."""
    from tickwork.ops.custom_resource import RESPONSE_MARGIN_SECONDS
    from tickwork.ops.provisioning import STATEMENT_MARGIN_SECONDS
    from tickwork.store.migrate import LOCK_TIMEOUT_SECONDS, MIGRATION_LOCK_SQL

    # Room for one wait for the lock, not for a second try.
    remaining = RESPONSE_MARGIN_SECONDS + STATEMENT_MARGIN_SECONDS + LOCK_TIMEOUT_SECONDS + 1
    with psycopg.connect(empty_schema, autocommit=True) as holder:
        holder.execute(f"SELECT pg_advisory_lock({MIGRATION_LOCK_SQL})")
        began = time.monotonic()
        migrations(_event(target, "Create"), FakeContext(remaining_ms=int(remaining * 1000)))
        took = time.monotonic() - began
    (response,) = cfn_responses(target)
    assert response["Status"] == "FAILED" and "MigrationLockError" in response["Reason"], response
    assert took < remaining - RESPONSE_MARGIN_SECONDS + 1, took  # answered with the margin left
    assert "jobs" not in _tables(empty_schema)
    migrations(_event(target, "Update", response["PhysicalResourceId"]), None)
    assert cfn_responses(target)[1]["Status"] == "SUCCESS" and "jobs" in _tables(empty_schema)


def test_a_lock_released_while_the_budget_lasts_is_waited_for_in_short_tries(
    fresh_services: Services, empty_schema: str,
) -> None:
    """Each try waits at most lock_timeout (traffic queued behind a DDL statement waits no longer), and
    the migration is tried again while its budget lasts: a lock held for a moment only delays it."""
    from tickwork.ops.provisioning import migrate_schema
    from tickwork.store.migrate import MIGRATION_LOCK_SQL, LockWaits

    holder = psycopg.connect(empty_schema, autocommit=True)
    holder.execute(f"SELECT pg_advisory_lock({MIGRATION_LOCK_SQL})")
    release = threading.Timer(1.5, holder.close)
    release.start()
    try:
        applied = migrate_schema(fresh_services.db, budget=20, waits=LockWaits(timeout_seconds=0.3, pause_seconds=0.2))
    finally:
        release.join()
    assert applied[0] == "0001_init.sql" and "jobs" in _tables(empty_schema)


def test_a_migration_that_outlasts_its_budget_is_answered_failed_in_time(target: Target) -> None:
    """Whatever holds the migration up (a statement the database has not ended yet), CloudFormation is
    answered when the budget is spent, not when Lambda kills the function."""
    from tickwork.ops.provisioning import handle_custom_resource

    stuck = threading.Event()
    began = time.monotonic()
    response = handle_custom_resource(_event(target, "Create"), lambda: [str(stuck.wait(30))], budget=1.0,
                                      hosts=ResponseHosts(also=(target.url,)))
    assert time.monotonic() - began < 3
    assert response["Status"] == "FAILED" and "did not finish within 1 s" in response["Reason"]
    assert cfn_responses(target) == [response]
    stuck.set()


LAYER = "arn:aws:lambda:us-east-1:123456789012:layer:tickwork-common:"


@pytest.mark.parametrize(("asked", "running", "status", "migrated"), [
    (7, 7, "SUCCESS", True),  # an update: the code came in the layer version asked for
    (7, 9, "SUCCESS", False),  # a failed update rolling back to 7: the schema stays, nothing is retried
    (9, 7, "FAILED", False),  # an environment older than the deploy: its migrations are not the deploy's
])
def test_a_stack_rolling_back_migrates_nothing(target: Target, asked: int, running: int, status: str,
                                               migrated: bool) -> None:
    """Break: an update whose migration failed (or outlasted the function) rolls back, and CloudFormation asks
    SchemaMigration to go back to the previous layer version, through the migrations function of the update.
    Must hold: it answers SUCCESS without migrating (migrating again would retry what failed and leave the
    stack in UPDATE_ROLLBACK_FAILED); the release rolled back to runs on the schema as it is."""
    from tickwork.ops.provisioning import handle_custom_resource

    event = _event(target, "Update", "SchemaMigration-schema")
    event["ResourceProperties"]["CodeVersion"] = f"{LAYER}{asked}"
    calls: list[int] = []
    response = handle_custom_resource(event, lambda: calls.append(1) or ["0020_x.sql"], budget=10,
                                      code_version=f"{LAYER}{running}", hosts=ResponseHosts(also=(target.url,)))
    assert (response["Status"], bool(calls)) == (status, migrated), response
    if status == "FAILED":
        assert f"{LAYER}{running}, older than the {LAYER}{asked}" in response["Reason"]


def test_a_delete_is_answered_without_the_database(servers: Any, migrations: Migrations, target: Target) -> None:
    """The stack's delete removes the database too: deleting the migration resource never waits on it."""
    with socket_closed_port() as port:
        settings = Settings(database_url=f"postgresql://tickwork@127.0.0.1:{port}/tickwork", redis_url=servers.redis_url)
        svc = build_services(settings, invoker=RecordingInvoker())
        configure(svc)
        try:
            migrations(_event(target, "Delete", "SchemaMigration-schema"), FakeContext(remaining_ms=20_000))
        finally:
            configure(None)
            svc.close()
    (response,) = cfn_responses(target)
    assert (response["Status"], response["PhysicalResourceId"]) == ("SUCCESS", "SchemaMigration-schema")


class socket_closed_port:
    """A loopback port nothing listens on (bound, then released)."""

    def __enter__(self) -> int:
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return int(sock.getsockname()[1])

    def __exit__(self, *exc: object) -> None:
        return None


def test_a_forged_response_url_is_refused_with_no_request_and_no_migration(
    fresh_services: Services, empty_schema: str, handler: Handler, target: Target,
) -> None:
    """The deployed handler answers only CloudFormation's response bucket (tickwork.ops.response_url): an
    event invoked with a URL of the sender's choosing gets no PUT there, and migrates nothing."""
    refused = handler("migrations")(_event(target, "Create"), None)
    assert refused["Status"] == "FAILED" and refused["Reason"].startswith("ResponseURL: "), refused
    assert target.requests == [] and "jobs" not in _tables(empty_schema)
