"""Operator actions on tenants, by direct Lambda invoke of the API function (tickwork.api.admin):
`lambda:InvokeFunction` on it is the permission, so no HTTP route leads here (an API Gateway event always carries
a requestContext).

{"admin": "create-tenant", "name": "acme"} creates a tenant and its first API key, and returns the key:
the only time it is seen in clear (only its digest is stored).

{"admin": "create-api-key", "tenant": "<id or name>", "name": "deploy", "scopes": ["jobs:read", "jobs:write"]}
issues a key of exactly those scopes to an existing tenant, and returns it, shown this once: what a tenant
needs when no key it has left may make the key it wants (a key with keys:admin makes and deletes only keys
within its own scopes: tickwork.tenant.apikeys). The tenant's audit log names the operator.

{"admin": "set-quotas", "tenant": "<id or name>", "max_jobs": 5000, "max_runs_per_minute": null} overrides
the tenant's quotas (tickwork.tenant.quotas): a number sets one, null goes back to the deployment's default, a
quota not named is left as it is. Returns the tenant's quotas in force. Jobs already over a lowered quota
keep running; the next create, update or resume that would exceed it is refused. A lowered
max_history_rows is applied by the next maintenance passes (tickwork.ops.maintenance), and
max_runs_in_flight (from 1) to the next runs dispatched (tickwork.dispatch.budget), max_storage_bytes (up
to 1 TiB) by the next maintenance pass (tickwork.ops.storage), and max_replays_queued (0 turns replays off) to
the next replay asked for.
{"admin": "rotate-encryption-key"} makes a new data key current and re-encrypts secrets, signing secrets and
sensitive job headers with it, in short batches for at most 10 s (tickwork.secrets.vault.rotate_data_key); the
maintenance pass re-encrypts what is left, and what an environment that had not yet seen the new key wrote
meanwhile. The answer counts what moved and what is left (`remaining`); older keys stay to open it.
{"admin": "release-quarantine", "job": "<id>"} or {"admin": "release-quarantine", "tenant": "<id or name>"} takes
one job, or every job of a tenant (1,000 a call: `more` says when to call again), out of quarantine
(tickwork.dispatch.quarantine): its error cleared, back at its first slot from now. Returns the ids released.
"""
from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Mapping

from aws_lambda_powertools import Logger

from tickwork.errors import ConflictError, InvalidInputError, NotFoundError
from tickwork.dueindex.index import DueIndex
from tickwork.scope import Actor, Scope
from tickwork.secrets.crypto import Keyring
from tickwork.settings import Settings
from tickwork.store import quotas as quotas_store
from tickwork.store import tenants
from tickwork.tenant import access, apikeys, quarantine, quotas

logger = Logger(child=True)

MAX_TENANT_NAME = 200
# Who the tenant's audit log says made what an operator action changed.
OPERATOR = Actor(key_name="operator")
_KEY_FIELDS = frozenset({"admin", "tenant", "name", "scopes"})
# Far above any deployment's needs, low enough that sums of runs a minute stay ordinary integers.
MAX_QUOTA = 10_000_000
# Bytes are counted in larger numbers: a tebibyte is more than any database a stack makes holds.
_HIGHEST = {"max_storage_bytes": 1 << 40}


def create_tenant_with_key(pool: Any, name: str) -> dict[str, Any]:
    from psycopg.errors import UniqueViolation

    try:
        with pool.connection() as conn, conn.transaction():
            if tenants.find_tenant(conn, name) is not None:
                raise _name_taken()
            tenant_id = tenants.create_tenant(conn, name)
            token = tenants.create_api_key(conn, tenant_id, name="bootstrap")
    except UniqueViolation as exc:
        # A concurrent call created the name between our check and our insert: the index decided.
        if exc.diag.constraint_name != "tenants_name_unique":
            raise
        raise _name_taken() from None
    logger.info("tenant created", extra={"tenant_id": tenant_id})
    return {"tenant_id": tenant_id, "name": name, "api_key": token,
            "note": "the key is shown only now: keep it (Authorization: Bearer <api_key>)"}


def _name_taken() -> ConflictError:
    return ConflictError("a tenant of that name (compared without case) exists already; its keys cannot be "
                         "shown again", field="name")


def tenant_name(raw: Any, what: str = "the tenant's name") -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise InvalidInputError("name", f"{what} is required (a non-empty string)")
    if len(raw.strip()) > MAX_TENANT_NAME:
        raise InvalidInputError("name", f"at most {MAX_TENANT_NAME} characters")
    return raw.strip()


def issue_api_key(pool: Any, index: DueIndex, settings: Settings, keyring: Keyring | None, now: datetime,
                  event: Mapping[str, Any]) -> dict[str, Any]:
    """A new key of the tenant `event` names (its id or name), holding exactly `scopes`, made as the API
    makes one (the tenant's key quota, an audit entry naming the operator)."""
    unknown = sorted(set(event) - _KEY_FIELDS)
    if unknown:
        raise InvalidInputError(unknown[0], "unknown field; the fields are tenant, name and scopes")
    name = tenant_name(event.get("name"), "the key's name (whose it is)")
    scopes = event.get("scopes")
    if not isinstance(scopes, list):
        raise InvalidInputError("scopes", f"required: a list of the key's scopes, of {', '.join(access.ALL_SCOPES)}")
    with pool.connection() as conn:
        tenant_id = _tenant_id(conn, event.get("tenant"))
    scope = Scope(pool, index, settings, tenant_id, now, keyring, frozenset(access.ALL_SCOPES), OPERATOR)
    row, token = apikeys.create_key(scope, name, scopes)
    logger.info("API key issued by the operator",
                extra={"tenant_id": tenant_id, "key_id": row.id, "scopes": row.scopes})
    return {"tenant_id": tenant_id, "id": row.id, "name": row.name, "prefix": row.prefix, "scopes": row.scopes,
            "api_key": token, "note": "the key is shown only now: keep it (Authorization: Bearer <api_key>)"}


def release_quarantine(pool: Any, index: DueIndex, now: datetime, event: Mapping[str, Any]) -> dict[str, Any]:
    """Release the job `event` names, or every job in quarantine of the tenant it names (its id or name)."""
    unknown = sorted(set(event) - {"admin", "job", "tenant"})
    if unknown or ("job" in event) == ("tenant" in event):
        raise InvalidInputError(unknown[0] if unknown else "job", "give the job's id, or the tenant's id or name")
    if "job" in event:
        try:
            job_id = str(uuid.UUID(event["job"]))
        except (ValueError, TypeError, AttributeError):
            raise InvalidInputError("job", "the job's id (a UUID)") from None
        done = quarantine.release(pool, index, now, job_id=job_id)
    else:
        with pool.connection() as conn:
            tenant_id = _tenant_id(conn, event["tenant"])
        done = quarantine.release(pool, index, now, tenant_id=tenant_id)
    return {"released": done.job_ids, "count": len(done.job_ids), "more": done.more}


def set_quotas(pool: Any, settings: Settings, event: Mapping[str, Any]) -> dict[str, Any]:
    changes = {name: _quota(name, event[name]) for name in quotas.QUOTA_FIELDS if name in event}
    unknown = sorted(set(event) - {"admin", "tenant", *quotas.QUOTA_FIELDS})
    if unknown:
        raise InvalidInputError(unknown[0], "unknown field; quotas are " + ", ".join(quotas.QUOTA_FIELDS))
    with pool.connection() as conn, conn.transaction():
        tenant_id = _tenant_id(conn, event.get("tenant"))
        quotas_store.set_overrides(conn, tenant_id, changes)
        overrides = quotas_store.get_overrides(conn, tenant_id)
    logger.info("tenant quotas set", extra={"tenant_id": tenant_id, **changes})
    in_force = quotas.effective(settings, overrides)
    return {"tenant_id": tenant_id, "quotas": in_force.as_dict(), "overrides": overrides}


def _quota(name: str, raw: Any) -> int | None:
    lowest = 1 if name in ("min_interval_seconds", "max_runs_in_flight") else 0
    highest = _HIGHEST.get(name, MAX_QUOTA)
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int) or not lowest <= raw <= highest:
        raise InvalidInputError(name, f"must be an integer from {lowest} to {highest}, or null for the default")
    return raw


def _tenant_id(conn: Any, raw: Any) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise InvalidInputError("tenant", "the tenant's id or name is required")
    tenant_id = tenants.resolve_tenant(conn, raw.strip())
    if tenant_id is None:
        raise NotFoundError("no tenant of that id or name", field="tenant")
    return tenant_id
