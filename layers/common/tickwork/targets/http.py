"""The HTTP kind of target: a job's `request`, sent with tickwork.http.delivery.

Preparing a run opens its secrets, checks its target (the SSRF guard again when a secret is in its URL, the
deployment's ports every time: a job may predate a change of them), pins the connection to the address just
checked, signs it, and readies a keep-alive connection with the request's head rendered into it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from tickwork.errors import InvalidInputError, SealError, SecretHostError, UnknownSecretError, UnsafeTargetError
from tickwork.http import delivery
from tickwork.http.connections import Connections
from tickwork.http.redaction import redact, spellings
from tickwork.http.targets import check_port, resolve_public_addresses, validate_target_url
from tickwork.interfaces import Attempt
from tickwork.models import StartedExecution
from tickwork.outcome import Failure, FailureKind, Outcome
from tickwork.rules import success
from tickwork.secrets.outgoing import TenantSecrets
from tickwork.settings import Settings
from tickwork.targets.base import Callback
from tickwork.timeutil import rfc3339
from tickwork.vocab import TargetKind

CALLBACK_HEADER = "Tickwork-Callback-Url"  # a run in callback mode (tickwork.rules.completion)


@dataclass
class HttpTarget:
    """`callback` gives a run in callback mode its attempt's callback (None for a run that is not; a Failure
    when it cannot be had); it is asked once the run's target passed its checks."""

    connections: Connections
    settings: Settings
    secrets: TenantSecrets
    callback: Callable[[StartedExecution], Callback | Failure | None]
    kind: TargetKind = field(default=TargetKind.HTTP, init=False)

    def prepare(self, run: StartedExecution) -> Attempt:
        try:
            request, values = self.secrets.request_to_send(run)
            signing = self.secrets.signing(run)
            if request["url"] != run.request["url"]:
                validate_target_url(request["url"], self.settings.allow_private_targets)
            check_port(request["url"], self.settings.target_ports)
        except UnknownSecretError as exc:
            return _failed(FailureKind.UNKNOWN_SECRET, exc.message)
        except SealError:
            return _failed(FailureKind.REFUSED, "refused: a stored secret does not decrypt")
        except SecretHostError as exc:
            return _failed(FailureKind.REFUSED, redact(f"refused: {exc.message}", spellings(exc.values)))
        except InvalidInputError as exc:  # its messages never quote the URL
            return _failed(FailureKind.REFUSED, f"refused: {exc.message}")
        headers, hidden = run_headers(run), values
        callback = self.callback(run)
        if isinstance(callback, Failure):
            return delivery.failed_before_sending(callback)
        if callback is not None:
            headers[CALLBACK_HEADER] = callback.url
            hidden = (*values, callback.token)  # a target echoing its request does not get the token into history
        timeout = delivery.request_timeout_seconds(request, self.settings.max_request_timeout_seconds)
        pinned = None
        if not self.settings.allow_private_targets:
            host, port = delivery.host_and_port(request["url"])
            try:
                # Connect to the address just checked, so a second DNS answer cannot point inside the network.
                pinned = resolve_public_addresses(host, port, allow_private=False)[0]
            except UnsafeTargetError as exc:
                return _failed(FailureKind.REFUSED, redact(f"refused: {exc.message}", spellings(values)))
            except OSError:
                return _failed(FailureKind.CONNECTION, "connection failed: could not resolve host")
        return delivery.prepare(self.connections, request, headers, timeout, pinned_address=pinned,
                                started_at=run.attempt_started_at, signing=signing, secrets=hidden)

    def judge(self, run: StartedExecution, outcome: Outcome) -> Outcome:
        return success.judge(run.success, outcome)


def run_headers(run: StartedExecution) -> dict[str, str]:
    """Headers that identify the run: the run id is stable across retries so targets can dedupe."""
    return {
        "Tickwork-Run-Id": run.id,
        "Tickwork-Job-Id": run.job_id,
        "Tickwork-Attempt": str(run.attempt),
        "Tickwork-Scheduled-For": rfc3339(run.scheduled_for) or "",
    }


def _failed(kind: FailureKind, error: str) -> delivery.Prepared:
    return delivery.failed_before_sending(Failure(kind, error))
