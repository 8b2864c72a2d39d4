"""Every kind of target, made for one executor invocation from the collaborators it is given."""
from __future__ import annotations

from concurrent.futures import Executor
from dataclasses import dataclass
from functools import partial
from typing import Callable

from tickwork.http.connections import Connections
from tickwork.models import StartedExecution
from tickwork.outcome import Failure
from tickwork.secrets.outgoing import TenantSecrets
from tickwork.settings import Settings
from tickwork.targets.aws.clients import Clients
from tickwork.targets.aws.target import AwsTarget
from tickwork.targets.base import Callback, Target
from tickwork.targets.http import HttpTarget
from tickwork.targetspec.aws import AWS_KINDS
from tickwork.vocab import TargetKind


@dataclass(frozen=True)
class AwsAccess:
    """What the AWS kinds call with, kept by the execution environment: the clients of target roles (their sessions
    and connections) and the threads calls are made on."""

    clients: Clients
    calls: Executor


@dataclass(frozen=True)
class Means:
    """What kinds of target are made with: the deployment's settings, the invocation's tenant secrets, the
    executor's callback maker (HttpTarget.callback), and each kind's own client (its environment's, kept warm)."""

    settings: Settings
    secrets: TenantSecrets
    callback: Callable[[StartedExecution], Callback | Failure | None]
    http: Connections
    aws: AwsAccess


def _http(means: Means) -> Target:
    return HttpTarget(means.http, means.settings, means.secrets, means.callback, means.aws.clients.sessions)


def _aws(kind: TargetKind, means: Means) -> Target:
    return AwsTarget(kind, means.aws.clients, means.secrets, means.aws.calls,
                     float(means.settings.max_request_timeout_seconds))


KINDS: dict[TargetKind, Callable[[Means], Target]] = {
    TargetKind.HTTP: _http, **{kind: partial(_aws, kind) for kind in AWS_KINDS.values()}}


def made(means: Means) -> dict[TargetKind, Target]:
    return {kind: make(means) for kind, make in KINDS.items()}
