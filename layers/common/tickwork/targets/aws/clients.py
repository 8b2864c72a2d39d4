"""boto3 clients for AWS targets, made with a role session's credentials and kept as long as it is.

A client costs milliseconds to make and holds its kept connections (TLS included) to its service, so each is made
once per role, tenant, service and region, and replaced with its session. botocore retries nothing (the job's retry
policy does) and waits for an answer as long as the longest attempt may. The endpoint is boto3's own: AWS's, or
the one `AWS_ENDPOINT_URL` (or `AWS_ENDPOINT_URL_<SERVICE>`) names, as with moto's server locally and in tests.
"""
from __future__ import annotations

import threading
from typing import Any, Callable

import boto3
from botocore.config import Config

from tickwork.outcome import Failure
from tickwork.targets.aws.credentials import RoleSession, RoleSessions

CONNECT_TIMEOUT_SECONDS = 5  # a connection to an AWS endpoint takes milliseconds; the attempt's deadline bounds all
# Calls in flight at once to one service per role: beyond it botocore opens connections it does not keep.
MAX_POOL_CONNECTIONS = 64


class Clients:
    """`endpoint_url`: None for boto3's (AWS_ENDPOINT_URL, ...); `read_timeout`: the longest an attempt may wait."""

    def __init__(self, sessions: RoleSessions, read_timeout: float, endpoint_url: str | None = None,
                 boto: Callable[[], Any] = boto3.session.Session) -> None:
        self.sessions, self.endpoint_url = sessions, endpoint_url
        self.config = Config(connect_timeout=CONNECT_TIMEOUT_SECONDS, read_timeout=read_timeout,
                             retries={"total_max_attempts": 1}, max_pool_connections=MAX_POOL_CONNECTIONS,
                             tcp_keepalive=True)
        self._make_boto: Callable[[], Any] = boto
        self._boto: Any = None
        self._kept: dict[tuple[str, str, str, str], tuple[RoleSession, Any]] = {}
        self._lock = threading.Lock()

    def client(self, role_arn: str, external_id: str, service: str, region: str, deadline: float) -> Any | Failure:
        """A client of `service` in `region` with the role's session (tickwork.targets.aws.credentials), or why
        there is none."""
        session = self.sessions.session(role_arn, external_id, deadline)
        if isinstance(session, Failure):
            return session
        key = (role_arn, external_id, service, region)
        with self._lock:  # boto3's Session is not thread-safe; its clients are
            kept = self._kept.get(key)
            if kept is None or kept[0] is not session:
                if self._boto is None:
                    self._boto = self._make_boto()
                kept = self._kept[key] = (session, self._boto.client(
                    service, region_name=region, endpoint_url=self.endpoint_url, config=self.config,
                    aws_access_key_id=session.access_key_id, aws_secret_access_key=session.secret_access_key,
                    aws_session_token=session.session_token))
            return kept[1]

    def forget(self, role_arn: str, external_id: str) -> None:
        """Drop the role's session and clients: the service refused their credentials (expired, revoked)."""
        self.sessions.forget(role_arn, external_id)
        with self._lock:
            for key in [k for k in self._kept if k[:2] == (role_arn, external_id)]:
                del self._kept[key]
