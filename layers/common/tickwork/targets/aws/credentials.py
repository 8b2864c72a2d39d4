"""Credentials for AWS targets: the job's role, assumed with the tenant's id as its external id.

The executor holds no permission on its users' resources and never calls a target with its own credentials. Each
target names a role (`role_arn`) that the deployment allows (`TICKWORK_TARGET_ROLE_PATTERN`, IAM's wildcards), whose
trust policy lets Tickwork assume it with `ExternalId` = the tenant's id: the guard AWS documents against the
confused deputy, so that one tenant cannot name another's role. A session is kept per role and tenant until
REFRESH_BEFORE_SECONDS before it expires (the clock is injected). An AssumeRole that is denied is tried again a few
times, within the attempt's time, for a role just created (IAM is eventually consistent), then refused naming the
role; a role denied lately is tried once. Throttling, a 5xx or no answer is a failure the job's retry policy retries.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import boto3
from botocore.config import Config

from tickwork.outcome import Failure, FailureKind
from tickwork.targets.aws import failures
from tickwork.targetspec import arns

SESSION_SECONDS = 3600  # every role may be assumed for an hour (IAM's default maximum session)
# A session is replaced this long before it expires: no call is made with credentials about to expire.
REFRESH_BEFORE_SECONDS = 300
# After a denied AssumeRole, tried again after each of these delays while the attempt's time allows: a role's
# trust policy takes seconds to be seen everywhere once created or changed.
DENIED_RETRY_DELAYS = (0.2, 0.5, 1.0)
# A role denied this recently is tried once per attempt, without the delays: it is denied, not new.
DENIAL_MEMORY_SECONDS = 60.0
ASSUME_ROLE = "sts:AssumeRole"
# botocore logs at DEBUG what it signs and receives: AssumeRole's answer (a session's secret key and token), each
# call's Authorization and X-Amz-Security-Token headers. Whatever level an operator sets (a Lambda's
# AWS_LAMBDA_LOG_LEVEL reaches the root logger), they are not written.
logging.getLogger("botocore").setLevel(logging.INFO)


@dataclass(frozen=True)
class RoleSession:
    role_arn: str
    external_id: str
    access_key_id: str
    secret_access_key: str
    session_token: str
    expires_at: float  # the clock's seconds


def role_refusal(patterns: str, role_arn: str) -> str | None:
    """Why the deployment does not let a target use `role_arn` (`patterns`: TICKWORK_TARGET_ROLE_PATTERN, separated
    by commas), or None if it does."""
    if not arns.is_role_arn(role_arn):
        return f"{role_arn} is not an IAM role's ARN"
    allowed = [p.strip() for p in patterns.split(",") if p.strip()]
    if not any(arns.matches(pattern, role_arn) for pattern in allowed):
        return f"role {role_arn} does not match the deployment's target role pattern ({', '.join(allowed)})"
    return None


def session_name(external_id: str) -> str:
    """What the role's account sees in CloudTrail: Tickwork and the tenant (IAM's characters, at most 64)."""
    cleaned = "".join(c if c.isalnum() or c in "+=,.@-_" else "-" for c in external_id)
    return f"tickwork-{cleaned}"[:64]


class RoleSessions:
    """Sessions of target roles, kept per role and external id. `sts` makes the executor's STS client (its own
    credentials: the one permission it has is sts:AssumeRole on the pattern), called once, when first needed."""

    def __init__(self, sts: Callable[[], Any], patterns: str, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self._make_sts: Callable[[], Any] = sts
        self._sts: Any = None
        self.patterns, self.clock, self.sleep = patterns, clock, sleep
        self._kept: dict[tuple[str, str], RoleSession] = {}
        self._denied: dict[tuple[str, str], float] = {}
        self._locks: dict[tuple[str, str], threading.Lock] = {}
        self._lock = threading.Lock()

    def session(self, role_arn: str, external_id: str, deadline: float) -> RoleSession | Failure:
        """A session of the role, kept or assumed now (by `deadline`, on the clock: the delays between tries end
        there); a Failure (refused: a role the deployment does not allow, or denied) otherwise."""
        refused = role_refusal(self.patterns, role_arn)
        if refused is not None:
            return Failure(FailureKind.REFUSED, f"refused: {refused}")
        key = (role_arn, external_id)
        with self._key_lock(key):  # runs of one role at once: one AssumeRole
            kept = self._kept.get(key)
            if kept is not None and self.clock() < kept.expires_at - REFRESH_BEFORE_SECONDS:
                return kept
            made = self._assume(role_arn, external_id, deadline)
            if isinstance(made, RoleSession):
                self._kept[key] = made
                self._denied.pop(key, None)
            return made

    def forget(self, role_arn: str, external_id: str) -> None:
        """Drop the kept session (its credentials were refused as expired or invalid)."""
        with self._lock:
            self._kept.pop((role_arn, external_id), None)

    def _assume(self, role_arn: str, external_id: str, deadline: float) -> RoleSession | Failure:
        key = (role_arn, external_id)
        recently = self.clock() - self._denied.get(key, float("-inf")) < DENIAL_MEMORY_SECONDS
        delays = () if recently else DENIED_RETRY_DELAYS
        for delay in (0.0, *delays):
            if delay:
                if self.clock() + delay >= deadline:
                    break
                self.sleep(delay)
            outcome = self._assume_once(role_arn, external_id)
            if not (isinstance(outcome, Failure) and outcome.kind is FailureKind.REFUSED):
                return outcome
        self._denied[key] = self.clock()
        return Failure(FailureKind.REFUSED, f"refused: role {role_arn} could not be assumed with external id "
                                            f"{external_id}: its trust policy must allow Tickwork with that "
                                            f"external id ({ASSUME_ROLE} denied)")

    def _assume_once(self, role_arn: str, external_id: str) -> RoleSession | Failure:
        try:
            answer = self._client().assume_role(RoleArn=role_arn, RoleSessionName=session_name(external_id),
                                                ExternalId=external_id, DurationSeconds=SESSION_SECONDS)
        except Exception as exc:  # botocore's errors and the connection's: classified, never raised
            return failures.of_exception(exc, ASSUME_ROLE, role_arn)
        given = answer["Credentials"]
        # The clock's own reading, not the answer's Expiration: the executor's clock may differ from AWS's.
        return RoleSession(role_arn, external_id, given["AccessKeyId"], given["SecretAccessKey"],
                           given["SessionToken"], self.clock() + SESSION_SECONDS)

    def _client(self) -> Any:
        with self._lock:
            if self._sts is None:
                self._sts = self._make_sts()
            return self._sts

    def _key_lock(self, key: tuple[str, str]) -> threading.Lock:
        with self._lock:
            return self._locks.setdefault(key, threading.Lock())


def executor_sts() -> Any:
    """The executor's STS client, with its own credentials (boto3's, in its region): AssumeRole is tried again by
    RoleSessions, not by botocore, within the attempt's time."""
    return boto3.client("sts", config=Config(connect_timeout=5, read_timeout=10, retries={"total_max_attempts": 1}))
