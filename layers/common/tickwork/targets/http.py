"""The HTTP kind of target: a job's `request`, sent with tickwork.http.delivery.

Preparing a run opens its secrets, checks its target (the SSRF guard again when a secret is in its URL, the
deployment's ports every time: a job may predate a change of them), pins the connection to the address just
checked, signs it (with SigV4 too for a `request.auth` of type aws_iam, as the job's role: its session kept or
assumed now, tickwork.targets.aws.credentials), and readies a keep-alive connection with the request's head
rendered into it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from tickwork.errors import InvalidInputError, SealError, SecretHostError, UnknownSecretError, UnsafeTargetError
from tickwork.http import delivery
from tickwork.http.connections import Connections
from tickwork.http.redaction import redact, spellings
from tickwork.http.sigv4 import SigV4
from tickwork.http.targets import check_port, resolve_public_addresses, validate_target_url
from tickwork.interfaces import Attempt
from tickwork.models import StartedExecution
from tickwork.outcome import Failure, FailureKind, Outcome
from tickwork.rules import success
from tickwork.secrets.outgoing import TenantSecrets
from tickwork.settings import Settings
from tickwork.targets.aws.credentials import RoleSessions
from tickwork.targets.base import Callback
from tickwork.timeutil import rfc3339
from tickwork.vocab import TargetKind

CALLBACK_HEADER = "Tickwork-Callback-Url"  # a run in callback mode (tickwork.rules.completion)


@dataclass
class HttpTarget:
    """`callback` gives a run in callback mode its attempt's callback (None for a run that is not; a Failure
    when it cannot be had); it is asked once the run's target passed its checks. `sessions`: the environment's
    role sessions (the AWS kinds' too), for a request signed with SigV4."""

    connections: Connections
    settings: Settings
    secrets: TenantSecrets
    callback: Callable[[StartedExecution], Callback | Failure | None]
    sessions: RoleSessions
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
        timeout = delivery.request_timeout_seconds(request, self.settings.max_request_timeout_seconds)
        sigv4 = self._sigv4(run, request.get("auth"), timeout)
        if isinstance(sigv4, Failure):
            return delivery.failed_before_sending(sigv4)
        headers, hidden = run_headers(run), values
        callback = self.callback(run)
        if isinstance(callback, Failure):
            return delivery.failed_before_sending(callback)
        if callback is not None:
            headers[CALLBACK_HEADER] = callback.url
            hidden = (*values, callback.token)  # a target echoing its request does not get the token into history
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
                                started_at=run.attempt_started_at, signing=signing, secrets=hidden,
                                sigv4=sigv4)

    def _sigv4(self, run: StartedExecution, auth: dict[str, str] | None, timeout: float) -> SigV4 | Failure | None:
        """What signs the run's request as its job's role (ExternalId: the tenant's id), or why it cannot be."""
        if auth is None:
            return None
        started = run.attempt_started_at.timestamp() if run.attempt_started_at else self.sessions.clock()
        session = self.sessions.session(auth["role_arn"], run.tenant_id, started + timeout)
        if isinstance(session, Failure):
            return session
        return SigV4(session.access_key_id, session.secret_access_key, session.session_token, auth["service"],
                     auth["region"])

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
