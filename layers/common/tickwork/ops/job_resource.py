"""The `Custom::TickworkJob` provider: CloudFormation's Create, Update and Delete of a job another stack
declares, done by the by-key job service (tickwork.tenant.bykey) for the tenant of the resource's API key, and
answered within the function's time on every path (tickwork.ops.custom_resource).

- Create and Update need `ApiKey`, a key with jobs:write, checked as the API checks a key
  (tickwork.tenant.apikeys.authenticate); the job is its tenant's (`Tenant`, when given, must name that
  tenant). An Update without one (the rollback of the update that added it) is authorised by the key of the
  properties it leaves. The audit log names the stack, the key and CloudFormation's request.
- The physical id is `<tenant id>/<key>`. Create and Update both put the declared job under its key
  (the same definition twice changes nothing); an Update to another tenant or key so answers another
  physical id, and CloudFormation then deletes the old one.
- The job's `source` is `cfn:<stack>/<logical id>` (tickwork.ops.job_properties.job_source). A key taken
  by a job from anywhere else (a file applied with `tickwork apply`, the API, another stack) is refused,
  never taken over; one of the same stack's resources is taken over (a resource renamed in the template
  is created before the old name is deleted). That is checked again in the write's transaction, which
  also records the full StackId that put the job (tickwork.store.stacks).
- Delete needs no key (a stack can always be deleted): it removes the job only while this resource manages
  it and the full StackId recorded for it is the event's, checked in the delete's transaction. A job already
  gone, taken over, never created (a Create that failed answered a placeholder id), or vouched for by no
  stack (made before stacks were recorded) is answered SUCCESS and left alone.
"""
from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any, Callable, Mapping

from aws_lambda_powertools import Logger

from tickwork.errors import (ConflictError, InvalidInputError, MissingScopeError, NotFoundError, QuotaExceededError,
                             TickworkError, UnauthorizedError)
from tickwork.models import Job, JobDraft
from tickwork.ops.custom_resource import Answer, answer
from tickwork.ops.job_properties import (
    RESOURCE_TYPE,
    JobProperties,
    api_key_of,
    checked_stack_id,
    credential_required,
    field_reason,
    job_source,
    read_properties,
    same_stack,
    stack_name,
    unresolved_reference,
    validation_reason,
)
from tickwork.ops.response_url import ResponseHosts
from tickwork.scope import Actor, Scope
from tickwork.store import jobs as jobs_store
from tickwork.store import stacks, tenants
from tickwork.store.keys import Caller
from tickwork.store.secrets import PgKeyStore
from tickwork.tenant import access, apikeys, bykey
from tickwork.timeutil import rfc3339
from tickwork.wiring import Services, api_pool

logger = Logger(child=True)

# The physical id answered for a Create that failed: nothing was made, so its Delete touches nothing.
NOT_CREATED_PREFIX = "not-created:"


def handle_job_resource(services: Callable[[], Services], event: Mapping[str, Any], budget: float,
                        http: Any = None, hosts: ResponseHosts | None = None) -> dict[str, Any]:
    """Act on one CloudFormation event and answer it within `budget` seconds, the services' clock read
    once. `services` is called within the budget: a deployment that cannot build them is answered too.
    `hosts`: where answers may go (tickwork.ops.custom_resource.answer; the handler leaves the default)."""
    failed_id = event.get("PhysicalResourceId") or f"{NOT_CREATED_PREFIX}{event.get('RequestId')}"
    return answer(event, lambda: _act(services(), event), budget, failed_id, _reason, http, hosts)


def physical_id(tenant_id: str, key: str) -> str:
    return f"{tenant_id}/{key}"


def parse_physical_id(value: str) -> tuple[str, str] | None:
    """(tenant id, key) of a job this provider answered with; None for a placeholder or anything else."""
    tenant, _, key = value.partition("/")
    try:
        return str(uuid.UUID(tenant)), key
    except ValueError:
        return None


def _act(svc: Services, event: Mapping[str, Any]) -> Answer:
    now = datetime.fromtimestamp(svc.clock(), timezone.utc)
    if event.get("ResourceType") != RESOURCE_TYPE:
        raise InvalidInputError("ResourceType", f"{event.get('ResourceType')!r} is not {RESOURCE_TYPE}, the only "
                                                "type this provider makes")
    stack_id = checked_stack_id(event.get("StackId"))
    source = job_source(stack_id, str(event["LogicalResourceId"]))
    if event["RequestType"] == "Delete":
        return _delete(svc, str(event["PhysicalResourceId"]), source, stack_id, now, event)
    declared = read_properties(event.get("ResourceProperties") or {})
    caller = _caller(svc, declared, event, now)
    scope = _scope(svc, caller.tenant_id, now, event, caller)
    job = _put(scope, declared, source, stack_id)
    if event["RequestType"] == "Update":
        _adopt_replaced(scope, str(event.get("PhysicalResourceId") or ""), declared.key, source, stack_id)
    logger.info("job declared by CloudFormation put", extra={"job_id": job.id, "tenant_id": scope.tenant_id,
                                                              "key": declared.key, "source": source,
                                                              "key_id": caller.key_id})
    return Answer(physical_id(scope.tenant_id, declared.key),
                  {"JobId": job.id, "NextRunAt": rfc3339(job.next_run_at) or ""})


def _caller(svc: Services, declared: JobProperties, event: Mapping[str, Any], now: datetime) -> Caller:
    """The key that authorises a Create or Update: ApiKey, else (an Update rolling back to a definition without
    one) the ApiKey of the properties it leaves; a key of the declared Tenant, with jobs:write."""
    token = declared.api_key or (api_key_of(event.get("OldResourceProperties"))
                                 if event["RequestType"] == "Update" else None)
    if token is None:
        raise credential_required(declared.tenant)
    if unresolved_reference(token):
        raise InvalidInputError("ApiKey", "a {{resolve:...}} reference CloudFormation did not resolve (it passes a "
                                          "secure one to a custom resource as written): pass the key in a NoEcho "
                                          "parameter (docs/jobs-as-code.md)")
    with svc.db.connection() as conn:
        try:
            caller = apikeys.authenticate(conn, token, now)
            access.check(caller.scopes, access.JOBS_WRITE)
        except (UnauthorizedError, MissingScopeError) as exc:
            raise InvalidInputError("ApiKey", exc.message) from None
        if declared.tenant is not None and tenants.resolve_tenant(conn, declared.tenant) != caller.tenant_id:
            raise InvalidInputError("Tenant", f"{declared.tenant} is not the tenant of ApiKey (its tenant is "
                                              f"{caller.tenant_id}); leave Tenant out, or name that tenant")
    return caller


def _put(scope: Scope, declared: JobProperties, source: str, stack_id: str) -> Job:
    def claim(conn: Any, existing: Job | None, job_id: str) -> None:
        if existing is not None and existing.source != source and not same_stack(existing.source, stack_id):
            owner = existing.source or "no stack or file (made with the API)"
            raise ConflictError(f"job {declared.key} already exists, managed by {owner}; choose another key, or "
                                f"delete that job or set its source to {source} first", field="Key")
        stacks.record_stack(conn, scope.tenant_id, job_id, stack_id, scope.key_id, scope.now)

    put, _ = bykey.put_job_by_key(scope, declared.key, _draft(declared, source), claim)
    return put.job


def _adopt_replaced(scope: Scope, old_id: str, key: str, source: str, stack_id: str) -> None:
    """An Update that replaces a job made before stacks were recorded (its key changed, in the update that
    added ApiKey): that job becomes the stack's too, so the Delete CloudFormation sends for it goes through."""
    old = parse_physical_id(old_id)
    if old is None or old[0] != scope.tenant_id or old[1] == key or not bykey.KEY.match(old[1]):
        return
    with scope.db.connection() as conn, conn.transaction():
        job = jobs_store.get_job_by_key(conn, scope.tenant_id, old[1], lock=True)
        if job is not None and job.source == source and stacks.stack_of(conn, scope.tenant_id, job.id) is None:
            stacks.record_stack(conn, scope.tenant_id, job.id, stack_id, scope.key_id, scope.now)


def _draft(declared: JobProperties, source: str) -> JobDraft:
    from pydantic import ValidationError

    from tickwork.api.models import JobCreate

    try:
        body = JobCreate.model_validate({**declared.body, "key": declared.key, "source": source})
    except ValidationError as exc:
        raise InvalidInputError(None, validation_reason(exc.errors())) from None
    return JobDraft.from_dict(body.model_dump())


def _delete(svc: Services, resource_id: str, source: str, stack_id: str, now: datetime,
            event: Mapping[str, Any]) -> Answer:
    target = parse_physical_id(resource_id)
    if target is None:
        return Answer(resource_id)  # a Create that failed: it made nothing
    scope = _scope(svc, target[0], now, event)

    def ours(conn: Any, job: Job) -> bool:
        return job.source == source and stacks.stack_of(conn, scope.tenant_id, job.id) == stack_id

    try:
        deleted = bykey.delete_job_by_key(scope, target[1], ours)
    except NotFoundError:
        deleted = False  # gone already: what Delete asks for
    logger.info("job declared by CloudFormation deleted" if deleted else "no job of this resource and stack to delete",
                extra={"key": target[1], "tenant_id": target[0], "source": source})
    return Answer(resource_id)


def _scope(svc: Services, tenant_id: str, now: datetime, event: Mapping[str, Any],
           caller: Caller | None = None) -> Scope:
    """The tenant's scope as the API builds it (the API's statement timeout included); the audit log names the
    stack, the key that authorised the change (none for a Delete) and CloudFormation's request id."""
    if svc.keyring is not None:
        with svc.db.connection() as conn:
            svc.keyring.ensure(PgKeyStore(conn))  # the first data key is made outside the job's transaction
    actor = Actor(key_id=caller.key_id if caller else None,
                  key_name=f"cloudformation:{stack_name(str(event['StackId']))}", request_id=str(event["RequestId"]))
    return Scope(api_pool(svc), svc.index, svc.settings, tenant_id, now, svc.keyring,
                 caller.scopes if caller else frozenset(), actor)


def _reason(exc: BaseException) -> str:
    """What CloudFormation shows: the API's wording for what the template got wrong; nothing of an
    unexpected error but its kind (the function's log has the rest)."""
    if isinstance(exc, QuotaExceededError):
        return f"tenant quota exceeded: {exc.message}"
    if isinstance(exc, TickworkError):
        return field_reason(getattr(exc, "field", None), exc.message)
    if isinstance(exc, TimeoutError):
        return str(exc)
    logger.error("unexpected error", exc_info=exc)
    return f"internal error ({type(exc).__name__}); see the Tickwork stack's JobsResourceFunction log"
