"""What an API key may do: its scopes. Each route needs one (tickwork.api.auth.requires); a key holds a set.

keys:admin lets a key create and delete the tenant's keys, but only keys whose every scope it holds itself:
keys:admin alone can neither mint a wider key nor remove one (a tenant's deploy key, its full key). Only an
operator (tickwork.tenant.operator) issues a key beyond what a tenant's keys hold.
"""
from __future__ import annotations

from typing import Collection, Sequence

from tickwork.errors import InvalidInputError, MissingScopeError

JOBS_READ = "jobs:read"  # read jobs, runs, notifications, stats, secret names; preview schedules
JOBS_WRITE = "jobs:write"  # create, change, pause, resume, delete jobs
RUNS_WRITE = "runs:write"  # run a job now
SECRETS_WRITE = "secrets:write"  # put and delete secrets; read and rotate the signing secret
KEYS_ADMIN = "keys:admin"  # create, list and delete API keys
# The audit log in full: who made each change (key id and name), from where, and the values before and after.
# GET /audit needs jobs:read; without this, it answers the entries without those (tickwork.tenant.audit).
AUDIT_READ = "audit:read"
ALL_SCOPES = (JOBS_READ, JOBS_WRITE, RUNS_WRITE, SECRETS_WRITE, KEYS_ADMIN, AUDIT_READ)


def check(held: Collection[str], needed: str) -> None:
    """MissingScopeError naming `needed` unless the key holds it."""
    if needed not in held:
        raise MissingScopeError(f"this API key lacks the scope {needed}", needed)


def check_covers(held: Collection[str], wanted: Collection[str], why: str) -> None:
    """MissingScopeError naming the first scope of `wanted` that `held` lacks, `why` ending its message."""
    missing = [scope for scope in wanted if scope not in held]
    if missing:
        raise MissingScopeError(f"this API key lacks the scope {missing[0]} {why}", missing[0])


def parse_scopes(given: Sequence[str] | None, granter: Collection[str]) -> tuple[str, ...]:
    """The scopes of a new key, in ALL_SCOPES order: `given` (400 naming `scopes.<i>` for an unknown one,
    400 for an empty list), or by default every scope the creating key holds; 403 naming a scope the
    creating key (`granter`) lacks itself."""
    if given is None:
        return tuple(s for s in ALL_SCOPES if s in granter)
    if not given:
        raise InvalidInputError("scopes", f"give at least one scope of: {', '.join(ALL_SCOPES)}")
    for index, scope in enumerate(given):
        if scope not in ALL_SCOPES:
            raise InvalidInputError(f"scopes.{index}", f"unknown scope; the scopes are: {', '.join(ALL_SCOPES)}")
        if scope not in granter:
            raise MissingScopeError(f"this API key lacks the scope {scope}, so it cannot give it to a new key",
                                    scope, f"scopes.{index}")
    return tuple(s for s in ALL_SCOPES if s in given)
