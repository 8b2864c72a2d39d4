"""A `Custom::TickworkJob` resource's properties, read as the job they declare. Pure: no I/O.

The properties mirror the API's job body in PascalCase (`Request.Url` is `request.url`,
`Retry.MaxAttempts` is `retry.max_attempts`), except the names of `Request.Headers`, which are the user's
header names and are kept as written. `Key` says which job it is, `ApiKey` whose (its key's tenant), and
`Tenant`, optional, must name that tenant; `ServiceToken` and `ServiceTimeout` are CloudFormation's own.
CloudFormation sends every scalar as a string ("300", "true"), so the body is checked by the API's own model in
pydantic's lax mode, which reads them as numbers and
booleans; its complaints are worded as the API's 400s, naming the field both ways
("Request.Url (request.url): ...").
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from tickwork.errors import InvalidInputError

RESOURCE_TYPE = "Custom::TickworkJob"
# The release that made ApiKey required (a resource made before it fails its next Create or Update without one).
CREDENTIAL_SINCE = "0.30.0"
# CloudFormation adds these to every custom resource's properties.
_CLOUDFORMATION = frozenset({"ServiceToken", "ServiceTimeout"})
# Which job, whose, and the credential: not fields of the job's body.
_IDENTITY = frozenset({"Tenant", "Key", "ApiKey"})
# arn:<partition>:cloudformation:<region>:<account>:stack/<name>/<id>; a stack's name is at most 128 characters.
_STACK_ID = re.compile(
    r"^arn:aws(?:-[a-z]+)*:cloudformation:[a-z0-9-]{1,32}:\d{12}:stack/[A-Za-z][A-Za-z0-9-]{0,127}/[A-Za-z0-9-]{1,64}$")
# Maps whose keys are the user's data, not field names: copied as written.
_VERBATIM = (("request", "headers"),)
_PASCAL = re.compile(r"^[A-Z][A-Za-z0-9]*$")
_WORD_START = re.compile(r"(?<!^)(?=[A-Z])")
# `source` of a job CloudFormation manages (the API's pattern, at most 128 characters).
SOURCE_PREFIX = "cfn:"
MAX_SOURCE_CHARS = 128
# Half of it at most for the stack's name, so the resource's name always keeps a part of its own.
_MAX_STACK_CHARS = 60
_DIGEST_CHARS = 16


@dataclass(frozen=True)
class JobProperties:
    """Which job (`key`; `tenant` as written, a name or an id, None when not given), the credential (None when
    not given) and the job's body in the API's field names."""

    tenant: str | None
    key: str
    body: dict[str, Any]
    api_key: str | None = None


def read_properties(properties: Mapping[str, Any]) -> JobProperties:
    """The declared job; InvalidInputError naming the property for a missing Key, a `Source` (the provider
    sets it), or a name that is not PascalCase."""
    key = _required(properties, "Key")
    tenant = properties.get("Tenant")
    if tenant is not None:
        tenant = _required(properties, "Tenant")
    if "Source" in properties:
        raise InvalidInputError("Source", "set by the provider (cfn:<stack>/<resource>), not by the template")
    fields = {name: value for name, value in properties.items() if name not in _CLOUDFORMATION | _IDENTITY}
    unknown: list[str] = []
    body = _api_names(fields, (), "", unknown)
    if unknown:
        raise InvalidInputError(None, f"unknown properties: {', '.join(unknown)} (properties are PascalCase)")
    return JobProperties(tenant=tenant, key=key, body=body, api_key=api_key_of(properties))


def api_key_of(properties: Mapping[str, Any] | None) -> str | None:
    """The `ApiKey` property; None when there is none (or it is blank or not a string)."""
    value = (properties or {}).get("ApiKey")
    return value.strip() if isinstance(value, str) and value.strip() else None


def credential_required(tenant: str | None) -> InvalidInputError:
    """What a Create or Update without ApiKey fails with: a resource made before it was required reads why."""
    whose = f"tenant {tenant}" if tenant else "the job's tenant"
    return InvalidInputError("ApiKey", f"required since release {CREDENTIAL_SINCE}: an API key with jobs:write of "
                                       f"{whose} (docs/jobs-as-code.md)")


def unresolved_reference(api_key: str) -> bool:
    """Whether ApiKey is a dynamic reference CloudFormation passed on as written, as it does any secure one
    ({{resolve:secretsmanager:...}}, {{resolve:ssm-secure:...}}) in a custom resource's properties."""
    return api_key.startswith("{{resolve:")


def checked_stack_id(value: Any) -> str:
    """The event's StackId, the ARN of a stack (InvalidInputError naming StackId otherwise)."""
    if not isinstance(value, str) or not _STACK_ID.fullmatch(value):
        raise InvalidInputError("StackId", "not a CloudFormation stack's ARN "
                                           "(arn:<partition>:cloudformation:<region>:<account>:stack/<name>/<id>)")
    return value


def template_path(field: str) -> str:
    """An API field ("request.url", "retry.max_attempts", "request.headers.X-Api-Key", "tags.2") as the
    template names it ("Request.Url", "Retry.MaxAttempts", "Request.Headers.X-Api-Key", "Tags.2")."""
    parts = field.split(".")
    for verbatim in _VERBATIM:
        if tuple(parts[:len(verbatim)]) == verbatim:
            return ".".join([*map(_pascal, verbatim), *parts[len(verbatim):]])
    return ".".join(_pascal(part) for part in parts)


def field_reason(field: str | None, message: str) -> str:
    """A complaint about a field, named the template's way and, when it differs, the API's:
    "Request.Url (request.url): ...", "Tenant: ..."."""
    if not field:
        return message
    named = template_path(field)
    return f"{named}: {message}" if named == field else f"{named} ({field}): {message}"


def validation_reason(errors: Sequence[Mapping[str, Any]]) -> str:
    """pydantic's complaints about the body (loc in API names) as the provider's reason: every unknown
    property at once, else the first complaint as the API's 400 words it."""
    from tickwork.api.errors import field_name, validation_message

    unknown = [template_path(field_name(e["loc"]) or "") for e in errors if e.get("type") == "extra_forbidden"]
    if unknown:
        return f"unknown properties: {', '.join(unknown)}"
    if not errors:
        return "invalid properties"
    first = errors[0]
    return field_reason(field_name(first.get("loc", ())), validation_message(first))


def job_source(stack_id: str, logical_id: str) -> str:
    """The `source` of the job a resource manages: `cfn:<stack name>/<logical id>`, so `tickwork apply
    --prune` of a file never touches it and a job is deleted only by the resource that manages it. A long
    name keeps its start and ends in a digest of the whole, within the API's 128 characters."""
    prefix = _stack_prefix(stack_id)
    return prefix + _bounded(logical_id, MAX_SOURCE_CHARS - len(prefix))


def same_stack(source: str | None, stack_id: str) -> bool:
    """Whether `source` is a resource of this stack (a resource renamed in the template is a new resource,
    created before the old one is deleted: it takes the job over)."""
    return source is not None and source.startswith(_stack_prefix(stack_id))


def stack_name(stack_id: str) -> str:
    # arn:aws:cloudformation:<region>:<account>:stack/<name>/<uuid>
    return stack_id.split("/")[1] if stack_id.count("/") >= 2 else stack_id


def _stack_prefix(stack_id: str) -> str:
    return f"{SOURCE_PREFIX}{_bounded(stack_name(stack_id), _MAX_STACK_CHARS)}/"


def _bounded(name: str, limit: int) -> str:
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:_DIGEST_CHARS]
    return f"{name[:limit - _DIGEST_CHARS - 1]}={digest}"


def _required(properties: Mapping[str, Any], name: str) -> str:
    value = properties.get(name)
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(name, "required")
    return value.strip()


def _api_names(value: Any, path: tuple[str, ...], named: str, unknown: list[str]) -> Any:
    """`value` with every field name in the API's spelling; names that are not PascalCase go to `unknown`
    (as the template wrote them)."""
    if isinstance(value, list):
        return [_api_names(item, path, f"{named}.{index}", unknown) for index, item in enumerate(value)]
    if not isinstance(value, dict) or path in _VERBATIM:
        return value
    converted = {}
    for name, item in value.items():
        where = f"{named}.{name}" if named else str(name)
        if not _PASCAL.match(str(name)):
            unknown.append(where)
            continue
        converted[_snake(name)] = _api_names(item, (*path, _snake(name)), where, unknown)
    return converted


def _snake(name: str) -> str:
    """MaxAttempts -> max_attempts; _pascal undoes it exactly for every PascalCase name."""
    return _WORD_START.sub("_", name).lower()


def _pascal(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))
