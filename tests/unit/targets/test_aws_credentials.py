"""Assuming a target's role (tickwork.targets.aws.credentials), against a fake STS client: moto enforces no trust
policy nor external id, so the refusals AWS answers are injected here. The clock and the sleeps are the test's."""
from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from tickwork.outcome import Failure, FailureKind
from tickwork.targets.aws.credentials import (DENIED_RETRY_DELAYS, REFRESH_BEFORE_SECONDS, SESSION_SECONDS,
                                              RoleSession, RoleSessions, role_refusal, session_name)

ROLE = "arn:aws:iam::123456789012:role/tickwork-target-orders"
PATTERN = "arn:aws:iam::*:role/tickwork-target-*"
TENANT = "0d6f2a8e-6b1e-4c51-9a43-6f3d2c1b0a99"
FAR = 1e12  # a deadline never reached


def _error(code: str, status: int) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}},
                       "AssumeRole")


class FakeSts:
    """Answers AssumeRole with fresh keys, or raises each of `failures` first (one per call)."""

    def __init__(self, *failures: Exception) -> None:
        self.failures = list(failures)
        self.calls: list[dict[str, Any]] = []

    def assume_role(self, **params: Any) -> dict[str, Any]:
        self.calls.append(params)
        if self.failures:
            raise self.failures.pop(0)
        n = len(self.calls)
        return {"Credentials": {"AccessKeyId": f"AK{n}", "SecretAccessKey": "s", "SessionToken": "t",
                                "Expiration": "2000-01-01T00:00:00Z"}}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def sessions(sts: FakeSts, clock: Clock) -> RoleSessions:
    return RoleSessions(lambda: sts, PATTERN, clock=clock, sleep=clock.sleep)


@pytest.mark.parametrize(("role", "allowed"), [
    (ROLE, True),
    ("arn:aws:iam::210987654321:role/tickwork-target-x", True),
    ("arn:aws:iam::123456789012:role/team/tickwork-target-x", False),  # a path: the pattern has none
    ("arn:aws:iam::123456789012:role/admin", False),
    ("arn:aws:iam::123456789012:role/tickwork-targetx", False),
    ("arn:aws:iam::123456789012:user/tickwork-target-x", False),
    ("arn:aws:iam::1234:role/tickwork-target-x", False),
])
def test_only_roles_of_the_pattern_are_allowed(role: str, allowed: bool) -> None:
    assert (role_refusal(PATTERN, role) is None) is allowed
    assert role_refusal(f"arn:aws:iam::123456789012:role/none, {PATTERN}", role) is None or not allowed


def test_a_role_outside_the_pattern_is_refused_without_calling_sts() -> None:
    sts, clock = FakeSts(), Clock()
    refused = sessions(sts, clock).session("arn:aws:iam::123456789012:role/admin", TENANT, FAR)
    assert isinstance(refused, Failure) and refused.kind is FailureKind.REFUSED
    assert "arn:aws:iam::123456789012:role/admin" in refused.error and sts.calls == []


def test_the_role_is_assumed_with_the_tenant_as_external_id_and_kept_until_near_its_expiry() -> None:
    sts, clock = FakeSts(), Clock()
    kept = sessions(sts, clock)
    first = kept.session(ROLE, TENANT, FAR)
    assert isinstance(first, RoleSession) and first.access_key_id == "AK1"
    assert sts.calls == [{"RoleArn": ROLE, "RoleSessionName": f"tickwork-{TENANT}", "ExternalId": TENANT,
                          "DurationSeconds": SESSION_SECONDS}]
    clock.now += SESSION_SECONDS - REFRESH_BEFORE_SECONDS - 1
    assert kept.session(ROLE, TENANT, FAR) is first and len(sts.calls) == 1
    assert isinstance(other := kept.session(ROLE, "another-tenant", FAR), RoleSession) and other.access_key_id == "AK2"
    clock.now += 1
    renewed = kept.session(ROLE, TENANT, FAR)
    assert isinstance(renewed, RoleSession) and renewed.access_key_id == "AK3"
    kept.forget(ROLE, TENANT)
    assert kept.session(ROLE, TENANT, FAR).access_key_id == "AK4"  # type: ignore[union-attr]


def test_a_denied_assume_role_is_tried_again_for_a_role_just_made() -> None:
    sts, clock = FakeSts(_error("AccessDenied", 403), _error("AccessDenied", 403)), Clock()
    made = sessions(sts, clock).session(ROLE, TENANT, FAR)
    assert isinstance(made, RoleSession) and len(sts.calls) == 3
    assert clock.slept == list(DENIED_RETRY_DELAYS[:2])


def test_a_role_still_denied_is_refused_naming_it_and_then_tried_once_per_attempt() -> None:
    denied = [_error("AccessDenied", 403) for _ in range(10)]
    sts, clock = FakeSts(*denied), Clock()
    kept = sessions(sts, clock)
    refused = kept.session(ROLE, TENANT, FAR)
    assert isinstance(refused, Failure) and refused.kind is FailureKind.REFUSED and not refused.kind.retried
    assert ROLE in refused.error and TENANT in refused.error and "sts:AssumeRole" in refused.error
    assert len(sts.calls) == 1 + len(DENIED_RETRY_DELAYS)
    again = kept.session(ROLE, TENANT, FAR)
    assert isinstance(again, Failure) and len(sts.calls) == 2 + len(DENIED_RETRY_DELAYS)


def test_the_tries_stop_at_the_attempts_deadline() -> None:
    sts, clock = FakeSts(*[_error("AccessDenied", 403) for _ in range(10)]), Clock()
    refused = sessions(sts, clock).session(ROLE, TENANT, deadline=clock.now + DENIED_RETRY_DELAYS[0] + 0.1)
    assert isinstance(refused, Failure) and len(sts.calls) == 2 and clock.slept == [DENIED_RETRY_DELAYS[0]]


@pytest.mark.parametrize(("error", "kind"), [
    (_error("Throttling", 400), FailureKind.TRANSIENT_STATUS),
    (_error("InternalFailure", 500), FailureKind.TRANSIENT_STATUS),
    (EndpointConnectionError(endpoint_url="https://sts.example"), FailureKind.CONNECTION),
])
def test_other_failures_are_left_to_the_jobs_retry_policy(error: Exception, kind: FailureKind) -> None:
    sts, clock = FakeSts(error), Clock()
    failed = sessions(sts, clock).session(ROLE, TENANT, FAR)
    assert isinstance(failed, Failure) and failed.kind is kind
    assert len(sts.calls) == 1 and clock.slept == []  # the retry policy tries again, later
    assert "sts.example" not in failed.error


def test_a_session_name_is_made_of_iam_characters() -> None:
    assert session_name("t/1 2") == "tickwork-t-1-2" and len(session_name("x" * 100)) == 64
