"""How a job is made and changed: the create, PATCH and PUT rules, and what each checks of the definition it
is given. No I/O: the tenant and the instant come from the `Scope`, and tickwork.tenant.jobs writes the result.
"""
from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import datetime
from typing import Any, Mapping

from tickwork.errors import ConflictError, InvalidInputError, ScheduleError, UnsafeTargetError
from tickwork.http.redaction import REDACTED, is_sensitive_header
from tickwork.http.sigv4 import SIGNED_BY_TICKWORK
from tickwork.http.targets import validate_target_url
from tickwork.models import (
    DEFINITION_FIELDS,
    TIMING_FIELDS,
    Completion,
    HttpRequest,
    Job,
    JobDraft,
    Notify,
    RetryPolicy,
    parsed_parts,
)
from tickwork.rules import policy
from tickwork.rules import completion as completion_rules
from tickwork.schedule import specs as scheduling
from tickwork.schedule.engine import Schedule, min_gap_seconds, parse_schedule
from tickwork.scope import Scope
from tickwork.secrets import vault
from tickwork.settings import Settings
from tickwork.targets.aws.credentials import role_refusal
from tickwork.targets.aws.rendering import check_saved_input
from tickwork.targetspec.aws import AwsTargetSpec
from tickwork.vocab import JobStatus

# Owned by the HTTP client (framing) or by the executor (run identity); a job may not set them.
_RESERVED_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "te", "trailer", "upgrade",
     "proxy-connection"}
)
_RESERVED_PREFIX = "tickwork-"
# Fields of the definition with a rule of their own; every other one a PATCH and a PUT set as given
# (pydantic has already checked them).
_RULED = ("key", "request", "target", "retry", "notify", "completion", *TIMING_FIELDS)
_AS_GIVEN = tuple(name for name in DEFINITION_FIELDS if name not in _RULED)


def new_job(scope: Scope, draft: JobDraft) -> Job:
    """The job a create would store (its sensitive headers not sealed yet), checked; nothing is written."""
    job_id = str(uuid.uuid4())  # first: the schedule's H and spread offset are derived from it
    schedule = parse(scope, draft.schedule, draft.timezone, draft.start_at, draft.end_at, draft.start_at or scope.now,
                     (job_id, draft.spread_seconds))
    check_catchup_window(schedule, draft.catchup_window_seconds)
    given = {name: getattr(draft, name) for name in DEFINITION_FIELDS}
    job = Job(**{**given, **_checked(scope.settings, draft), "schedule": schedule.canonical,
                 "timezone": schedule.timezone}, id=job_id, tenant_id=scope.tenant_id, created_at=scope.now,
              updated_at=scope.now)
    scheduling.remember(job, schedule)
    return replace(job, next_run_at=require_run(job, scope.now))


def patched(scope: Scope, job: Job, changes: Mapping[str, Any]) -> Job:
    """PATCH rules: `request` and `retry` merge into what is stored; a change of schedule, time zone or window
    bumps the version (so a poller holding the old spec cannot advance the new one) and restarts the job
    at its first slot after now, its max_runs counted afresh. A paused job stays paused; a completed job becomes
    active again. A key is set once."""
    given = parsed_parts({name: value for name, value in changes.items() if name not in ("request", "retry")})
    for name, other in (("request", job.target), ("target", job.request)):
        if changes.get(name) is not None and other is not None:
            raise InvalidInputError(name, f"this job has a {'target' if name == 'request' else 'request'}: "
                                          "a PATCH cannot change what kind of call a job makes (PUT it by key)")
    updated = replace(job, **{name: given[name] for name in _AS_GIVEN if name in given})
    if given.get("key") is not None and given["key"] != job.key:
        if job.key is not None:
            raise InvalidInputError("key", f"cannot change once set (it is {job.key!r}): create a job with the new key")
        updated = replace(updated, key=given["key"])
    if changes.get("request") is not None and job.request is not None:
        updated = replace(updated, request=checked_request(scope.settings, _merged_request(job.request,
                                                                                            changes["request"])))
    if given.get("target") is not None:
        updated = replace(updated, target=checked_target(scope.settings, given["target"]))
    if "retry" in changes:
        updated = replace(updated, retry=RetryPolicy.from_dict({**job.retry.to_dict(), **changes["retry"]}))
    if "notify" in given:
        updated = replace(updated, notify=checked_notify(scope.settings, given["notify"]))
    if "completion" in given:
        updated = replace(updated, completion=checked_completion(given["completion"]))
    if any(name in given for name in TIMING_FIELDS):
        updated = rescheduled(scope, updated, given)
    if "schedule" in given or "catchup_window_seconds" in given:
        check_catchup_window(scheduling.job_schedule(updated), updated.catchup_window_seconds)
    return updated


def redefined(scope: Scope, job: Job, draft: JobDraft) -> Job:
    """PUT rules: the whole definition is the draft's (a field left out takes its default), under the PATCH rules
    for timing (the version moves only when schedule, time zone or window do) and for state (a paused job stays
    paused). The draft's headers are taken as they are (tickwork.tenant.jobs.replaced keeps sealed ones)."""
    updated = replace(job, **{name: getattr(draft, name) for name in _AS_GIVEN}, **_checked(scope.settings, draft))
    updated = rescheduled(scope, updated, {name: getattr(draft, name) for name in TIMING_FIELDS})
    check_catchup_window(scheduling.job_schedule(updated), updated.catchup_window_seconds)
    return updated


def _checked(settings: Settings, draft: JobDraft) -> dict[str, Any]:
    if (draft.request is None) == (draft.target is None):
        raise InvalidInputError("request" if draft.target is None else "target",
                                "a job has either a request (an HTTP call) or a target (an AWS one): give exactly one")
    return {"request": None if draft.request is None else checked_request(settings, draft.request),
            "target": None if draft.target is None else checked_target(settings, draft.target), "retry": draft.retry,
            "notify": checked_notify(settings, draft.notify), "completion": checked_completion(draft.completion)}


def rescheduled(scope: Scope, job: Job, changes: Mapping[str, Any]) -> Job:
    timing = {name: changes.get(name, getattr(job, name)) for name in TIMING_FIELDS}
    anchor = timing["start_at"] or job.created_at
    schedule = parse(scope, timing["schedule"], timing["timezone"], timing["start_at"], timing["end_at"], anchor,
                     (job.id, timing["spread_seconds"]))
    moved = replace(job, **{**timing, "schedule": schedule.canonical, "timezone": schedule.timezone})
    if moved.timing == job.timing:
        return job
    moved = replace(moved, version=job.version + 1, runs_sent=0)  # a new schedule counts max_runs afresh
    scheduling.remember(moved, schedule)
    if job.status == JobStatus.PAUSED:
        return moved
    return replace(moved, status=JobStatus.ACTIVE, next_run_at=require_run(moved, scope.now))


def check_catchup_window(schedule: Schedule, window_seconds: int) -> None:
    limit = policy.max_catchup_window_seconds(min_gap_seconds(schedule))
    if limit is not None and window_seconds > limit:
        raise InvalidInputError("catchup_window_seconds", (
            f"must be at most {limit} for this schedule: {policy.MAX_CATCHUP_SLOTS} of its runs (a week of a "
            "per-minute job), so catching up after an outage stays bounded"))


def paused(job: Job) -> Job:
    if job.status == JobStatus.COMPLETED:
        raise ConflictError("a completed job cannot be paused; give it a new schedule to run it again")
    return replace(job, status=JobStatus.PAUSED, next_run_at=None)


def resumed(job: Job, now: datetime) -> Job:
    """Back to the first slot after now: runs missed while paused are skipped, not replayed in a burst."""
    if job.status == JobStatus.COMPLETED:
        raise ConflictError("a completed job cannot be resumed; give it a new schedule to run it again")
    if job.status == JobStatus.ACTIVE:
        return job
    if job.max_runs is not None and job.runs_sent >= job.max_runs:
        # Every run it may send was claimed: no next slot; it completes once the last one has ended (its end, or
        # maintenance's finish_jobs step when nothing is left to end).
        return replace(job, status=JobStatus.ACTIVE, next_run_at=None, paused_reason=None)
    next_run_at = scheduling.first_slot(scheduling.job_schedule(job), now)
    status = JobStatus.ACTIVE if next_run_at else JobStatus.COMPLETED
    return replace(job, status=status, next_run_at=next_run_at, paused_reason=None)


def parse(
    scope: Scope, expression: str, timezone: str, start_at: datetime | None, end_at: datetime | None,
    anchor: datetime, per_job: tuple[str, int],
) -> Schedule:
    """A schedule as given, checked against the tenant's settings and now. `anchor` must be what
    `scheduling.job_schedule` will use for the stored job: start_at, else created_at; `per_job` its (id,
    spread_seconds)."""
    return parse_schedule(
        expression, timezone, anchor=anchor, start_at=start_at, end_at=end_at, now=scope.now,
        min_interval_seconds=scope.settings.min_interval_seconds, hash_key=per_job[0], spread_seconds=per_job[1],
    )


def require_run(job: Job, now: datetime) -> datetime:
    """The first slot after now of a job being created or rescheduled; one that would never run is refused."""
    next_run_at = scheduling.first_slot(scheduling.job_schedule(job), now)
    if next_run_at is not None:
        return next_run_at
    if job.end_at is not None and job.end_at <= now:
        raise ScheduleError("end_at is in the past", "end_at")
    raise ScheduleError("the schedule has no run after now", "schedule")


# ---------------------------------------------------------------- the parts

def _merged_request(stored: HttpRequest, patch: Mapping[str, Any]) -> HttpRequest:
    merged = HttpRequest.from_dict({**stored.to_dict(), **patch})
    if "headers" in patch:
        merged = replace(merged, headers=keep_redacted(stored.headers, patch["headers"]))
    return merged


def checked_request(settings: Settings, request: HttpRequest) -> HttpRequest:
    """The request as stored: URL through the SSRF guard, timeout within the deployment's cap, method set."""
    url = validate_target_url(request.url, settings.allow_private_targets, settings.target_ports)
    if request.timeout_seconds > settings.max_request_timeout_seconds:
        raise InvalidInputError(
            "request.timeout_seconds", f"must be at most {settings.max_request_timeout_seconds} seconds"
        )
    for name in request.headers:
        if name.lower() in _RESERVED_HEADERS or name.lower().startswith(_RESERVED_PREFIX):
            raise InvalidInputError(f"request.headers.{name}", f"the {name} header cannot be set on a job")
    if request.auth is not None:
        _check_auth(settings, request)
    method = request.method or ("POST" if request.body is not None else "GET")
    return replace(request, url=url, method=method, headers=dict(request.headers))


def checked_target(settings: Settings, target: AwsTargetSpec) -> AwsTargetSpec:
    """An AWS target as stored (the spec checked its own fields): a role the deployment may assume, a timeout within
    its cap, an input that fits its service's limit once rendered, whatever the secrets it names hold."""
    refused = role_refusal(settings.target_role_pattern, target.role_arn)
    if refused is not None:
        raise InvalidInputError("target.role_arn", refused)
    if (target.timeout_seconds or 0) > settings.max_request_timeout_seconds:
        raise InvalidInputError("target.timeout_seconds",
                                f"must be at most {settings.max_request_timeout_seconds} seconds")
    check_saved_input(target, vault.MAX_VALUE_BYTES)
    return target


def _check_auth(settings: Settings, request: HttpRequest) -> None:
    """A signed request's role is one the deployment lets jobs use, and the signature's headers are its own."""
    assert request.auth is not None
    refused = role_refusal(settings.target_role_pattern, request.auth.role_arn)
    if refused is not None:
        raise InvalidInputError("request.auth.role_arn", refused)
    for name in request.headers:
        if name.lower() in SIGNED_BY_TICKWORK:
            raise InvalidInputError(f"request.headers.{name}", f"the {name} header is set by request.auth's signature")


def checked_completion(given: Completion | None) -> Completion | None:
    """As stored (tickwork.rules.completion.stored): none for response mode; a timeout is for callback mode only."""
    if given and given.timeout_seconds is not None and given.mode != completion_rules.CALLBACK:
        raise InvalidInputError("completion.timeout_seconds", "is only for mode callback")
    stored = completion_rules.stored(None if given is None else given.to_dict())
    return None if stored is None else Completion.from_dict(stored)


def checked_notify(settings: Settings, notify: Notify | None) -> Notify | None:
    """The notification target goes through the same SSRF guard as a job's URL."""
    if notify is None:
        return None
    try:
        url = validate_target_url(notify.url, settings.allow_private_targets, settings.target_ports)
    except UnsafeTargetError as exc:
        raise UnsafeTargetError(exc.message, "notify.url") from None
    except InvalidInputError as exc:
        raise InvalidInputError("notify.url", exc.message) from None
    return replace(notify, url=url)


def redacted_request(request: HttpRequest) -> dict[str, Any]:
    """The request as it may be shown: sensitive header values replaced by REDACTED."""
    headers = {k: REDACTED if is_sensitive_header(k) else v for k, v in request.headers.items()}
    return {**request.to_dict(), "headers": headers}


def keep_redacted(stored: Mapping[str, str], given: Mapping[str, str]) -> dict[str, str]:
    """Headers from an update, where a sensitive header sent back as REDACTED keeps its stored value.

    Clients edit a job by sending back what they read; without this they would overwrite a secret with ***.
    """
    old = {k.lower(): v for k, v in stored.items()}
    return {
        k: old[k.lower()] if v == REDACTED and is_sensitive_header(k) and k.lower() in old else v
        for k, v in given.items()
    }
