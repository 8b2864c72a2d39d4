"""What a request needs from its tenant before it leaves: its secrets opened and interpolated, its signing keys.

One `TenantSecrets` serves one executor invocation: each tenant's signing keys (and, for jobs that use
them, its secrets) are read from Postgres once for the whole group, and opened with the environment's
cached data keys; nothing is read per run.
"""
from __future__ import annotations

import threading
import time
from datetime import datetime, timezone
from typing import Any, Callable, Iterable
from urllib.parse import urlsplit

from aws_lambda_powertools import Logger

from tickwork.http.redaction import secret_values
from tickwork.http.signing import Signing, message_id, webhook_timestamp
from tickwork.errors import SecretHostError, TickworkError
from tickwork.models import StartedExecution
from tickwork.secrets import hosts, interpolation, vault
from tickwork.secrets.crypto import Keyring, require_keyring
from tickwork.store import secrets as store
from tickwork.store.secrets import PoolKeyStore

logger = Logger(child=True)


class TenantSecrets:
    def __init__(self, svc: Any, clock: Callable[[], float] = time.time) -> None:
        self.keyring: Keyring = require_keyring(svc.keyring)
        self.db = svc.db
        self.keys = PoolKeyStore(svc.db)
        self.clock = clock
        self._signing: dict[str, tuple[bytes, ...]] = {}
        self._sealed: dict[str, dict[str, store.SealedSecret]] = {}
        self._opened: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()

    def request_to_send(self, run: StartedExecution) -> tuple[dict[str, Any], tuple[str, ...]]:
        """The run's request as sent (sealed headers opened, `${secrets.NAME}` replaced) and the secret
        values it now holds; UnknownSecretError for a name the tenant lacks, SecretHostError for a secret
        the URL's host (as sent) is not one of the allowed hosts of."""
        request = run.request
        headers = request.get("headers") or {}
        if any(vault.is_sealed(v) for v in headers.values()):
            request = {**request, "headers": vault.opened_headers(self.keyring, self.keys, run.tenant_id, run.job_id,
                                                                  headers)}
        names = {name for _, name in interpolation.references(request)}
        if not names:
            return dict(request), ()
        sealed = self._sealed_secrets(run.tenant_id)
        values = {name: self._open(run.tenant_id, name, sealed[name].sealed) for name in names if name in sealed}
        expanded, used = interpolation.expand_request(request, values)
        sent = tuple(values[name] for name in sorted(used))
        refused = hosts.refusal(expanded["url"], sorted(used), {name: sealed[name].allowed_hosts for name in used})
        if refused is not None:
            raise SecretHostError(refused, sent)
        return expanded, sent

    def unbound_values(self, tenant_id: str, names: Iterable[str]) -> dict[str, str]:
        """The values of the named secrets the tenant has, for a call bound for no URL's host (an AWS target):
        SecretHostError for a secret restricted to allowed hosts, which may go to none but those; a name the
        tenant lacks is left out (expanding its reference raises UnknownSecretError)."""
        wanted = set(names)
        if not wanted:
            return {}
        sealed = self._sealed_secrets(tenant_id)
        restricted = sorted(name for name in wanted if name in sealed and sealed[name].allowed_hosts is not None)
        if restricted:
            raise SecretHostError(f"secret {restricted[0]} may only be sent to its allowed hosts, and an AWS target "
                                  "has none", ())
        return {name: self._open(tenant_id, name, sealed[name].sealed) for name in wanted if name in sealed}

    def values_to_redact(self, run: StartedExecution, *also: str) -> tuple[str, ...]:
        """What a text the run's target wrote (a completion's output) is redacted of: the request's sensitive
        values, the secrets it references as the tenant has them now, and `also`. Unlike `request_to_send`, it
        never raises for what the tenant changed since the request was sent: a secret deleted is left out, one
        no longer allowed for the URL's host is still redacted, a value that does not open is skipped (logged)."""
        request = run.request
        headers = {name: self._header_value(run, name, value) for name, value in (request.get("headers") or {}).items()}
        names = sorted({name for _, name in interpolation.references(request)})
        sealed = self._sealed_secrets(run.tenant_id) if names else {}
        # Each lambda is called at once, inside its own iteration: it cannot see a later `name`.
        values = [_or_skipped(run, f"secret {name}", lambda: self._open(run.tenant_id, name, sealed[name].sealed))  # noqa: B023
                  for name in names if name in sealed]
        return secret_values(headers, urlsplit(request["url"]).query, (*filter(None, values), *also))

    def _header_value(self, run: StartedExecution, name: str, value: str) -> str:
        if not vault.is_sealed(value):
            return value
        return _or_skipped(run, f"header {name}", lambda: vault.opened_headers(
            self.keyring, self.keys, run.tenant_id, run.job_id, {name: value})[name])

    def signing(self, run: StartedExecution) -> Signing:
        """The run's signature: its job's and its own id (a notification's: its event id), its planned instant
        (the scheduled second for a first attempt, the retry's due time for a retry, when it started if that was
        later; now, once that is stale: tickwork.http.signing.webhook_timestamp) and the tenant's keys."""
        planned = run.scheduled_for if run.attempt == 1 else (run.attempt_started_at or run.scheduled_for)
        return Signing(run.message_id or message_id(run.job_id, run.id), webhook_timestamp(planned, self.clock()),
                       self.signing_keys(run.tenant_id))

    def read_ahead(self, conn: Any, tenant_ids: Iterable[str]) -> None:
        """The signing keys of `tenant_ids` not read yet, in one statement on `conn` (an invocation's runs are of
        many tenants at a busy instant: one read each would cost a statement apiece). A tenant without a secret,
        or whose secret does not open, is left to `signing_keys`, at its first run."""
        with self._lock:
            wanted = sorted(set(tenant_ids) - set(self._signing))
            if wanted:
                now = datetime.fromtimestamp(self.clock(), tz=timezone.utc)
                self._signing.update(vault.signing_keys_of(self.keyring, conn, wanted, now))

    def signing_keys(self, tenant_id: str) -> tuple[bytes, ...]:
        with self._lock:
            known = self._signing.get(tenant_id)
            if known is None:
                now = datetime.fromtimestamp(self.clock(), tz=timezone.utc)
                with self.db.connection() as conn:
                    known = self._signing[tenant_id] = vault.signing_keys(self.keyring, conn, tenant_id, now)
            return known

    def _sealed_secrets(self, tenant_id: str) -> dict[str, store.SealedSecret]:
        with self._lock:
            sealed = self._sealed.get(tenant_id)
            if sealed is None:
                with self.db.connection() as conn:
                    sealed = self._sealed[tenant_id] = store.sealed_secrets(conn, tenant_id)
            return sealed

    def _open(self, tenant_id: str, name: str, sealed: str) -> str:
        opened = self._opened.get((tenant_id, name))
        if opened is None:
            opened = self._opened[(tenant_id, name)] = vault.open_secret(self.keyring, self.keys, tenant_id, name,
                                                                         sealed)
        return opened


def _or_skipped(run: StartedExecution, what: str, opener: Callable[[], str]) -> str:
    """What `opener` opens, or "" (logged with the run's ids, never a value) when it does not open."""
    try:
        return opener()
    except TickworkError as exc:
        logger.warning("a value did not open for redaction", extra={
            "job_id": run.job_id, "execution_id": run.id, "value": what, "error_type": type(exc).__name__})
        return ""
