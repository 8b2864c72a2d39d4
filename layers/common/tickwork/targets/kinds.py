"""Every kind of target, made for one executor invocation from the collaborators it is given."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from tickwork.http.connections import Connections
from tickwork.models import StartedExecution
from tickwork.outcome import Failure
from tickwork.secrets.outgoing import TenantSecrets
from tickwork.settings import Settings
from tickwork.targets.base import Callback, Target, TargetKind
from tickwork.targets.http import HttpTarget


@dataclass(frozen=True)
class Means:
    """What kinds of target are made with: the deployment's settings, the invocation's tenant secrets, the
    executor's callback maker (HttpTarget.callback), and each kind's own client (its environment's, kept warm)."""

    settings: Settings
    secrets: TenantSecrets
    callback: Callable[[StartedExecution], Callback | Failure | None]
    http: Connections


def _http(means: Means) -> Target:
    return HttpTarget(means.http, means.settings, means.secrets, means.callback)


KINDS: dict[TargetKind, Callable[[Means], Target]] = {TargetKind.HTTP: _http}


def made(means: Means) -> dict[TargetKind, Target]:
    return {kind: make(means) for kind, make in KINDS.items()}
