"""Database credentials from the secret RDS manages (moto stands in for Secrets Manager), used against
the real Postgres, re-read when the database refuses them (rotation).

The test server trusts loopback connections, so a changed password alone would still be accepted. A
rotation is played here as what the functions see of it: the login in the cached secret stops working
(the role is set NOLOGIN) and the secret now names one that works.
"""
from __future__ import annotations

import json
import uuid
from typing import Any, Iterator
from unittest import mock

import boto3
import psycopg
import pytest
from moto import mock_aws
from psycopg.conninfo import conninfo_to_dict

from tickwork import wiring
from tickwork.errors import ConfigurationError
from tickwork.settings import Settings
from tickwork.store.credentials import SecretCredentials

PASSWORD = "s3cret-not-for-logs"


@pytest.fixture
def roles(servers: Any) -> Iterator[list[str]]:
    """Two throwaway login roles (roles are cluster-wide: unique names, dropped afterwards)."""
    names = [f"tw_role_{uuid.uuid4().hex[:10]}" for _ in range(2)]
    with psycopg.connect(servers.database_url, autocommit=True) as admin:
        for name in names:
            admin.execute(f"CREATE ROLE {name} LOGIN PASSWORD '{PASSWORD}'")
    yield names
    with psycopg.connect(servers.database_url, autocommit=True) as admin:
        for name in names:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (name,))
            admin.execute(f"DROP ROLE {name}")


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    with mock_aws():
        yield boto3.client("secretsmanager")


def _secret(client: Any, username: str) -> str:
    # The shape RDS gives the secret of a managed master password.
    value = json.dumps({"username": username, "password": PASSWORD})
    return client.create_secret(Name=f"rds!db-{uuid.uuid4()}", SecretString=value)["ARN"]


def _secret_settings(servers: Any, secret_arn: str) -> Settings:
    server = conninfo_to_dict(servers.database_url)
    return Settings(
        database_url="", redis_url=servers.redis_url, database_secret_arn=secret_arn,
        database_host=str(server.get("host", "127.0.0.1")), database_port=int(server.get("port", 5432)),
        database_name=str(server.get("dbname", "postgres")), database_sslmode="disable",
    )


def _current_user(pool: Any) -> str:
    with pool.connection() as conn:
        return str(conn.execute("SELECT current_user").fetchone()[0])


def test_the_pool_logs_in_with_the_credentials_in_the_secret(servers: Any, roles: list[str], secrets: Any) -> None:
    pool = wiring.connect_db(_secret_settings(servers, _secret(secrets, roles[0])), max_size=1)
    try:
        assert _current_user(pool) == roles[0]
    finally:
        pool.close()


def test_after_a_rotation_the_refused_login_re_reads_the_secret(servers: Any, roles: list[str], secrets: Any) -> None:
    arn = _secret(secrets, roles[0])
    pool = wiring.connect_db(_secret_settings(servers, arn), max_size=1)
    try:
        assert _current_user(pool) == roles[0]
        secrets.put_secret_value(SecretId=arn, SecretString=json.dumps({"username": roles[1], "password": PASSWORD}))
        with psycopg.connect(servers.database_url, autocommit=True) as admin:
            admin.execute(f"ALTER ROLE {roles[0]} NOLOGIN")
            # The pooled session ends (as after a failover or an idle timeout): the pool must log in
            # again, first with the login it has cached.
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (roles[0],))
        with mock.patch.object(wiring, "IDLE_PING_SECONDS", 0.0):
            with pool.connection(timeout=10) as conn:
                assert conn.execute("SELECT current_user").fetchone()[0] == roles[1]
    finally:
        pool.close()


def test_a_refusal_the_secret_does_not_explain_is_raised_without_the_password(
    servers: Any, roles: list[str], secrets: Any
) -> None:
    arn = _secret(secrets, roles[0])
    with psycopg.connect(servers.database_url, autocommit=True) as admin:
        admin.execute(f"ALTER ROLE {roles[0]} NOLOGIN")
    settings = _secret_settings(servers, arn)
    credentials = SecretCredentials.from_settings(settings, secrets)
    with pytest.raises(psycopg.OperationalError) as raised:
        credentials.connect(settings.database_url, psycopg.connect)
    assert "not permitted to log in" in str(raised.value)
    assert PASSWORD not in str(raised.value) and PASSWORD not in repr(raised.value)


def test_the_url_keeps_working_without_a_secret(settings: Settings) -> None:
    assert not settings.database_secret_arn
    pool = wiring.connect_db(settings, max_size=1)
    try:
        assert _current_user(pool)
    finally:
        pool.close()


def test_settings_take_a_secret_instead_of_a_url() -> None:
    env = {"REDIS_URL": "redis://h:6379/0", "DATABASE_SECRET_ARN": "arn:aws:secretsmanager:us-east-1:1:secret:x",
           "DATABASE_HOST": "db.internal", "DATABASE_PORT": "5433", "DATABASE_NAME": "tickwork"}
    settings = Settings.from_env(env)
    assert (settings.database_url, settings.database_host, settings.database_port) == ("", "db.internal", 5433)
    assert settings.database_name == "tickwork" and settings.database_sslmode == "require"
    with pytest.raises(ConfigurationError, match="DATABASE_HOST"):
        Settings.from_env({**env, "DATABASE_HOST": ""})
    with pytest.raises(ConfigurationError, match="DATABASE_URL or DATABASE_SECRET_ARN"):
        Settings.from_env({"REDIS_URL": "redis://h:6379/0", "DATABASE_URL": "", "DATABASE_SECRET_ARN": ""})
