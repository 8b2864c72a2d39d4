"""A tenant's secrets and signing secrets, and the sealed header values of its jobs: sealed, opened, checked in a
job's request and re-sealed onto a new data key. What the tenant's API keys do with them (put, list, delete,
rotate, each audited) is tickwork.tenant.secrets.

Every value is sealed (tickwork.secrets.crypto) before it reaches Postgres and opened only to be sent. What a
ciphertext may be opened as is its context: `secret/<tenant>/<name>`, `header/<tenant>/<job>/<header>`,
`signing/<tenant>/<id>`. Sensitive header values (tickwork.http.redaction) are sealed in place in the job's
request: a sealed one starts with a line break, which no header value from the API can hold (rows
written before sealing existed keep plain values, which are still sent, and sealed on their next write).
"""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Mapping, Sequence

from aws_lambda_powertools import Logger
from psycopg.types.json import Jsonb

from tickwork.errors import InvalidInputError, SealError
from tickwork.http import signing
from tickwork.http.redaction import is_sensitive_header
from tickwork.secrets import hosts, interpolation
from tickwork.secrets.crypto import CURRENT_VERSION_TTL_SECONDS, Keyring, require_keyring
from tickwork.store import secrets as store
from tickwork.store.secrets import PgKeyStore

logger = Logger(child=True)

MAX_VALUE_BYTES = 8 * 1024
SEALED_MARK = "\nsealed:"


# ---------------------------------------------------------------- secrets

def seal_secret(keyring: Keyring, keys: PgKeyStore, tenant_id: str, name: str, value: str) -> str:
    """A secret's value as stored (tickwork.tenant.secrets puts it)."""
    return keyring.seal(keys, value, _secret_context(tenant_id, name))


def check_request(
    keyring: Keyring | None, conn: Any, tenant_id: str, job_id: str, request: Mapping[str, Any],
    opened: Mapping[str, str] | None = None,
) -> None:
    """A job's request as it is saved, 400 naming the field otherwise: it references only secrets that
    exist, each sent only to a host it allows (tickwork.secrets.hosts), and it fits the bounds of what it
    may expand to with its secrets at their largest (tickwork.secrets.interpolation). Stored sealed headers
    an update keeps are checked opened (their ciphertext is longer than what is sent, and hides any
    reference); `opened`: those the request has opened already, by sealed value (`opened_headers`' `known`)."""
    headers = request.get("headers") or {}
    if any(is_sealed(v) for v in headers.values()):
        sent = opened_headers(require_keyring(keyring), PgKeyStore(conn), tenant_id, job_id, headers, opened)
        request = {**request, "headers": sent}
    if interpolation.has_references(request):
        restrictions = store.secret_hosts(conn, tenant_id)
        for field_name, name in interpolation.references(request):
            if name not in restrictions:
                raise InvalidInputError(field_name, f"unknown secret {name}")
        hosts.check_request(request, restrictions)
    interpolation.check_worst_case(request, MAX_VALUE_BYTES)


# ---------------------------------------------------------------- signing secrets

def current_signing(keyring: Keyring, conn: Any, tenant_id: str, now: datetime) -> str:
    rows = store.signing_secrets(conn, tenant_id, now)
    if rows and rows[0].expires_at is None:
        return keyring.open(PgKeyStore(conn), rows[0].sealed, _signing_context(tenant_id, rows[0].id))
    secret = signing.new_secret()
    if add_signing(keyring, conn, tenant_id, secret, now):
        return secret
    return current_signing(keyring, conn, tenant_id, now)  # another first use won


def add_signing(keyring: Keyring, conn: Any, tenant_id: str, secret: str, now: datetime) -> bool:
    secret_id = str(uuid.uuid4())
    sealed = keyring.seal(PgKeyStore(conn), secret, _signing_context(tenant_id, secret_id))
    return store.add_signing_secret(conn, tenant_id, secret_id, sealed, now)


# ---------------------------------------------------------------- job headers

def seal_request(
    keyring: Keyring | None, conn: Any, tenant_id: str, job_id: str, request: Mapping[str, Any],
) -> dict[str, Any]:
    """The request as stored: every sensitive header value sealed (those already sealed are kept)."""
    headers = request.get("headers") or {}
    if not any(is_sensitive_header(name) and not is_sealed(v) for name, v in headers.items()):
        return dict(request)
    keyring, keys = require_keyring(keyring), PgKeyStore(conn)
    sealed = {name: _seal_header(keyring, keys, tenant_id, job_id, name, value)
              if is_sensitive_header(name) and not is_sealed(value) else value for name, value in headers.items()}
    return {**request, "headers": sealed}


def _seal_header(keyring: Keyring, keys: PgKeyStore, tenant_id: str, job_id: str, name: str, value: str) -> str:
    return SEALED_MARK + keyring.seal(keys, value, _header_context(tenant_id, job_id, name))


def is_sealed(value: str) -> bool:
    return value.startswith(SEALED_MARK)


def opened_headers(
    keyring: Keyring, keys: Any, tenant_id: str, job_id: str, headers: Mapping[str, str],
    known: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Header values as they are sent. `known`: what sealed values opened earlier in the same request open to,
    by sealed value; those are not opened again."""
    known = known or {}
    return {
        name: _opened_header(keyring, keys, tenant_id, job_id, name, value, known) if is_sealed(value) else value
        for name, value in headers.items()
    }


def _opened_header(
    keyring: Keyring, keys: Any, tenant_id: str, job_id: str, name: str, value: str, known: Mapping[str, str],
) -> str:
    if value in known:
        return known[value]
    return keyring.open(keys, value[len(SEALED_MARK):], _header_context(tenant_id, job_id, name))


# ---------------------------------------------------------------- what the executor opens

def signing_keys(keyring: Keyring, conn: Any, tenant_id: str, now: datetime) -> tuple[bytes, ...]:
    """The HMAC keys that sign the tenant's requests now (two for a day after a rotation), current first;
    the first request of a tenant without a secret creates it."""
    rows = store.signing_secrets(conn, tenant_id, now)
    if not rows:
        current_signing(keyring, conn, tenant_id, now)
        rows = store.signing_secrets(conn, tenant_id, now)
    return _opened_signing(keyring, PgKeyStore(conn), tenant_id, rows)


def signing_keys_of(keyring: Keyring, conn: Any, tenant_ids: Sequence[str], now: datetime,
                    ) -> dict[str, tuple[bytes, ...]]:
    """`signing_keys` of several tenants, read in one statement: those of tenants that have a secret and whose
    secrets open. The others are left out, for `signing_keys` to create or to refuse, one by one."""
    keys, found = PgKeyStore(conn), {}
    for tenant_id, rows in store.signing_secrets_of(conn, tenant_ids, now).items():
        try:
            found[tenant_id] = _opened_signing(keyring, keys, tenant_id, rows)
        except SealError:
            continue
    return found


def _opened_signing(keyring: Keyring, keys: Any, tenant_id: str, rows: Sequence[Any]) -> tuple[bytes, ...]:
    opened = (keyring.open(keys, row.sealed, _signing_context(tenant_id, row.id)) for row in rows)
    return tuple(signing.secret_key(secret) for secret in opened)


def open_secret(keyring: Keyring, keys: Any, tenant_id: str, name: str, sealed: str) -> str:
    """A secret's value, to be sent (tickwork.secrets.outgoing)."""
    return keyring.open(keys, sealed, _secret_context(tenant_id, name))


# ---------------------------------------------------------------- rotation

# Rows per batch: each batch is opened and sealed outside any transaction, then written back in one short one.
RESEAL_BATCH = 100
# The admin call's share of the API Lambda's 29 s; the maintenance pass does the rest, a little each minute.
ROTATION_SECONDS = 10.0
MAINTENANCE_RESEAL_SECONDS = 2.0
# Another environment may seal with the previous key until it re-reads the current version: a rotation is
# settled only once the new key is older than that (and nothing older is left).
SETTLE_SECONDS = 2 * CURRENT_VERSION_TTL_SECONDS
_SEALED_TABLES = ("secrets", "signing_secrets")


@dataclass
class Resealing:
    """What one call moved onto `key_version`, and how many rows still hold values of an older key."""

    key_version: int
    secrets: int = 0
    signing_secrets: int = 0
    jobs: int = 0
    remaining: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def rotate_data_key(keyring: Keyring, pool: Any, clock: Callable[[], float] = time.monotonic,
                    seconds: float = ROTATION_SECONDS) -> dict[str, Any]:
    """Make a new data key current and re-seal what fits in `seconds` with it: secrets, signing secrets,
    sensitive headers; the maintenance pass (`reseal_unsettled`) finishes. No row is locked longer than
    one batch's writes, so the poller's and the API's writes go on."""
    with pool.connection() as conn:
        version = keyring.rotate(PgKeyStore(conn))
    done = reseal_all(keyring, pool, version, clock() + seconds, clock)
    logger.info("data key rotated", extra=done.as_dict())
    return done.as_dict()


def reseal_unsettled(keyring: Keyring | None, pool: Any, clock: Callable[[], float] = time.monotonic,
                     seconds: float = MAINTENANCE_RESEAL_SECONDS) -> Resealing | None:
    """The maintenance pass's part: go on re-sealing onto the newest key until nothing older is left; None
    once that is so (one indexed read)."""
    with pool.connection() as conn:
        version = store.unsettled_key(conn)
    if keyring is None or version is None:
        return None
    done = reseal_all(keyring, pool, version, clock() + seconds, clock)
    if not any(done.remaining.values()):
        with pool.connection() as conn:
            store.mark_resealed(conn, version, SETTLE_SECONDS)
    if done.secrets or done.signing_secrets or done.jobs:
        logger.info("values re-sealed onto the newest data key", extra=done.as_dict())
    return done


def reseal_all(keyring: Keyring, pool: Any, version: int, deadline: float, clock: Callable[[], float]) -> Resealing:
    """Re-seal onto `version` batch by batch until nothing is left or `deadline` (on `clock`) has passed."""
    done = Resealing(version)
    for table in (*_SEALED_TABLES, "jobs"):
        after = store.FIRST_ID
        while clock() < deadline:
            with pool.connection() as conn:
                moved, last = _reseal_batch(keyring, conn, table, version, after)
            if last is None:
                break
            after = last
            setattr(done, table, getattr(done, table) + moved)
    with pool.connection() as conn:
        done.remaining = store.count_stale(conn, SEALED_MARK, version)
    return done


def _reseal_batch(keyring: Keyring, conn: Any, table: str, version: int, after: str) -> tuple[int, str | None]:
    """One batch: (rows moved, the last id read or None when none was left). A row written meanwhile is
    left as it is (compare-and-set) and found again by a later pass."""
    keys = PgKeyStore(conn)
    changes: list[tuple[str, Any, Any]] = []
    rows: list[Any] = (store.stale_requests(conn, SEALED_MARK, version, after, RESEAL_BATCH) if table == "jobs"
                       else store.stale_sealed(conn, table, version, after, RESEAL_BATCH))
    for row in rows:
        try:
            changes.append((row.id, Jsonb(row.request), Jsonb(_resealed_request(keyring, keys, row, version)))
                           if table == "jobs" else (row.id, row.sealed, _resealed(keyring, keys, table, row, version)))
        except SealError:  # left as it is, and counted as remaining: it no longer opens anywhere
            logger.error("a sealed value does not open: not re-sealed", extra={"table": table, "row_id": row.id})
    with conn.transaction():
        moved = sum(store.reseal(conn, table, row_id, old, new) for row_id, old, new in changes)
    return moved, rows[-1].id if rows else None


def _resealed(keyring: Keyring, keys: PgKeyStore, table: str, row: store.StaleSealed, version: int) -> str:
    contexts = {"secrets": _secret_context, "signing_secrets": _signing_context}
    context = contexts[table](row.tenant_id, row.key)
    return keyring.seal(keys, keyring.open(keys, row.sealed, context), context, version)


def _resealed_request(keyring: Keyring, keys: PgKeyStore, job: store.StaleRequest, version: int) -> dict[str, Any]:
    """The request with every sealed header value under `version` (plain ones are sealed on the job's next write)."""
    headers = job.request.get("headers") or {}
    resealed = {name: _reseal_header(keyring, keys, job, name, value, version) if is_sealed(value) else value
                for name, value in headers.items()}
    return {**job.request, "headers": resealed}


def _reseal_header(
    keyring: Keyring, keys: PgKeyStore, job: store.StaleRequest, name: str, value: str, version: int,
) -> str:
    context = _header_context(job.tenant_id, job.id, name)
    if keyring.version_of(value[len(SEALED_MARK):]) == version:
        return value
    return SEALED_MARK + keyring.seal(keys, keyring.open(keys, value[len(SEALED_MARK):], context), context, version)


# ---------------------------------------------------------------- helpers

def _secret_context(tenant_id: str, name: str) -> str:
    return f"secret/{tenant_id}/{name}"


def _signing_context(tenant_id: str, secret_id: str) -> str:
    return f"signing/{tenant_id}/{secret_id}"


def _header_context(tenant_id: str, job_id: str, name: str) -> str:
    return f"header/{tenant_id}/{job_id}/{name.lower()}"
