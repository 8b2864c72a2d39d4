"""The `Custom::TickworkJob` provider: CloudFormation's Create, Update and Delete of a job another stack
declares, done by the by-key job service (tickwork.tenant.bykey) for the tenant the resource names, and
answered within the function's time on every path (tickwork.ops.custom_resource).

- The physical id is `<tenant id>/<key>`. Create and Update both put the declared job under its key
  (the same definition twice changes nothing); an Update that names another tenant or key so answers
  another physical id, and CloudFormation then deletes the old one.
- The job's `source` is `cfn:<stack>/<logical id>` (tickwork.ops.job_properties.job_source). A key taken
  by a job from anywhere else (a file applied with `tickwork apply`, the API, another stack) is refused,
  never taken over; one of the same stack's resources is taken over (a resource renamed in the template
  is created before the old name is deleted).
- Delete removes the job only while this resource manages it: one already gone, taken over or never
  created (a Create that failed answered a placeholder id) is answered SUCCESS and left alone.
"""
from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any, Callable, Mapping

from aws_lambda_powertools import Logger

from tickwork.errors import ConflictError, InvalidInputError, NotFoundError, QuotaExceededError, TickworkError
from tickwork.models import JobRow
from tickwork.ops.custom_resource import Answer, answer
from tickwork.ops.response_url import ResponseHosts
from tickwork.ops.job_properties import (
    RESOURCE_TYPE,
    JobProperties,
    field_reason,
    job_source,
    read_properties,
    same_stack,
    stack_name,
    validation_reason,
)
from tickwork.scope import Actor, Scope
from tickwork.store import tenants
from tickwork.store.secrets import PgKeyStore
from tickwork.tenant import bykey
from tickwork.tenant.jobs import JobDraft
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
    source = job_source(str(event["StackId"]), str(event["LogicalResourceId"]))
    if event["RequestType"] == "Delete":
        return _delete(svc, str(event["PhysicalResourceId"]), source, now, event)
    declared = read_properties(event.get("ResourceProperties") or {})
    scope = _scope(svc, _tenant_id(svc, declared.tenant), now, event)
    job = _put(scope, declared, source, str(event["StackId"]))
    logger.info("job declared by CloudFormation put", extra={"job_id": job.id, "tenant_id": scope.tenant_id,
                                                              "key": declared.key, "source": source})
    return Answer(physical_id(scope.tenant_id, declared.key),
                  {"JobId": job.id, "NextRunAt": rfc3339(job.next_run_at) or ""})


def _put(scope: Scope, declared: JobProperties, source: str, stack_id: str) -> JobRow:
    draft = _draft(declared, source)
    existing = _find(scope, declared.key)
    if existing is not None and existing.source != source and not same_stack(existing.source, stack_id):
        owner = existing.source or "no stack or file (made with the API)"
        raise ConflictError(f"job {declared.key} already exists, managed by {owner}; choose another key, or "
                            f"delete that job or set its source to {source} first", field="Key")
    put, _ = bykey.put_job_by_key(scope, declared.key, draft)
    return put.job


def _draft(declared: JobProperties, source: str) -> JobDraft:
    from pydantic import ValidationError

    from tickwork.api.models import JobCreate

    try:
        body = JobCreate.model_validate({**declared.body, "key": declared.key, "source": source})
    except ValidationError as exc:
        raise InvalidInputError(None, validation_reason(exc.errors())) from None
    return JobDraft(**body.model_dump())


def _delete(svc: Services, resource_id: str, source: str, now: datetime, event: Mapping[str, Any]) -> Answer:
    target = parse_physical_id(resource_id)
    if target is None:
        return Answer(resource_id)  # a Create that failed: it made nothing
    scope = _scope(svc, target[0], now, event)
    job = _find(scope, target[1])
    if job is None or job.source != source:
        logger.info("no job of this resource to delete", extra={"key": target[1], "tenant_id": target[0],
                                                                 "managed_by": None if job is None else job.source})
        return Answer(resource_id)
    try:
        bykey.delete_job_by_key(scope, target[1])
    except NotFoundError:
        pass  # deleted meanwhile: what Delete asks for
    logger.info("job declared by CloudFormation deleted", extra={"job_id": job.id, "tenant_id": target[0]})
    return Answer(resource_id)


def _find(scope: Scope, key: str) -> JobRow | None:
    try:
        return bykey.get_job_by_key(scope, key).job
    except NotFoundError:
        return None


def _tenant_id(svc: Services, tenant: str) -> str:
    with svc.db.connection() as conn:
        found = tenants.resolve_tenant(conn, tenant)
    if found is None:
        raise InvalidInputError("Tenant", f"no tenant named {tenant}")
    return found


def _scope(svc: Services, tenant_id: str, now: datetime, event: Mapping[str, Any]) -> Scope:
    """The tenant's scope as the API builds it (the API's statement timeout included); the audit log names the
    stack and CloudFormation's request id."""
    if svc.keyring is not None:
        with svc.db.connection() as conn:
            svc.keyring.ensure(PgKeyStore(conn))  # the first data key is made outside the job's transaction
    actor = Actor(key_name=f"cloudformation:{stack_name(str(event['StackId']))}", request_id=str(event["RequestId"]))
    return Scope(api_pool(svc), svc.index, svc.settings, tenant_id, now, svc.keyring, actor=actor)


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
