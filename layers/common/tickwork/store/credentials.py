"""Database logins from the secret RDS manages in Secrets Manager, re-read when Postgres refuses them.

RDS rotates a managed master password on its own schedule; sessions already open survive it, new logins
with the old password do not. So the secret is read once (cold start) and cached, and read again only
when a new connection is refused: the first refusal after a rotation costs one extra Secrets Manager call.
"""
from __future__ import annotations

from typing import Any, Callable, TypeVar

import psycopg
from psycopg.conninfo import make_conninfo

from tickwork.errors import ConfigurationError
from tickwork.settings import Settings

Conn = TypeVar("Conn")

# Rotation is noticed by a refused login, not by the cache expiring; this only bounds how stale a
# credential can get on a database that never refuses it (e.g. trust authentication).
SECRET_MAX_AGE_SECONDS = 3600


class SecretCredentials:
    """Builds conninfo from a secret {"username", "password"} plus the host, port and database name."""

    def __init__(self, provider: Any, settings: Settings) -> None:
        self._provider = provider
        self._settings = settings

    @classmethod
    def from_settings(cls, settings: Settings, client: Any) -> SecretCredentials:
        from aws_lambda_powertools.utilities.parameters import SecretsProvider

        return cls(SecretsProvider(boto3_client=client), settings)

    def conninfo(self, base: str = "", refresh: bool = False) -> str:
        """`base` (other libpq options, e.g. a search_path) with the address and the secret's login."""
        secret = self._provider.get(
            self._settings.database_secret_arn, transform="json",
            max_age=SECRET_MAX_AGE_SECONDS, force_fetch=refresh,
        )
        if not isinstance(secret, dict) or "username" not in secret or "password" not in secret:
            raise ConfigurationError("the database secret must be JSON with username and password")
        s = self._settings
        return make_conninfo(
            base, host=s.database_host, port=s.database_port, dbname=s.database_name or None,
            user=secret["username"], password=secret["password"], sslmode=s.database_sslmode,
            sslrootcert=s.database_sslrootcert or None,
        )

    def connect(self, base: str, connect: Callable[[str], Conn]) -> Conn:
        """Connect; if refused, re-read the secret and try once more, but only if the login changed."""
        cached = self.conninfo(base)
        try:
            return connect(cached)
        except psycopg.OperationalError:
            fresh = self.conninfo(base, refresh=True)
            if fresh == cached:
                raise  # the database is down or refuses this login for another reason
            return connect(fresh)


def connection_class(settings: Settings) -> type[psycopg.Connection[Any]]:
    """The connection class a pool should use: plain for a URL, secret-backed with DATABASE_SECRET_ARN."""
    if not settings.database_secret_arn:
        return psycopg.Connection
    import boto3

    credentials = SecretCredentials.from_settings(settings, boto3.client("secretsmanager"))

    class SecretConnection(psycopg.Connection[Any]):
        @classmethod
        def connect(cls, conninfo: str = "", **kwargs: Any) -> Any:  # type: ignore[override]
            parent = super(SecretConnection, cls).connect
            return credentials.connect(conninfo, lambda info: parent(info, **kwargs))

    return SecretConnection
