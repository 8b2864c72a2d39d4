"""HTTP requests signed with SigV4 (`request.auth` of type aws_iam) against a local http.server that records what
arrives, the role assumed on moto's STS (tests/aws.py): every request verifies under an independent SigV4 check
(tests/sigv4.py) with the assumed session's keys, and nothing stored or logged holds the signature or the token.

The signature's date is botocore's clock at signing: these runs are scheduled at the current second and the
executor's FakeClock starts there, so every time in a test derives from that one reading.
"""
from __future__ import annotations

import json
import logging
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any, Iterator

import pytest

from tests import aws
from tests.conftest import Target
from tests.integration.api_client import Api, use_clock, use_settings
from tests.integration.helpers import executions
from tests.integration.secrets.test_secret_delivery import _postgres_dump, _redis_dump, _run
from tests.sigv4 import verifies
from tests.support import FakeClock
from tickwork.http.connections import Connections
from tickwork.models import StartedExecution
from tickwork.outcome import FailureKind, Outcome
from tickwork.runs import executor
from tickwork.secrets.outgoing import TenantSecrets
from tickwork.store.tenants import create_tenant
from tickwork.targets import kinds
from tickwork.targets.aws.credentials import RoleSession, RoleSessions
from tickwork.targets.http import HttpTarget
from tickwork.wiring import Services

AUTH = {"type": "aws_iam", "role_arn": aws.ROLE_ARN, "service": "lambda", "region": "eu-west-1"}


@pytest.fixture
def sessions(moto_endpoint: str) -> RoleSessions:
    return aws.clients(moto_endpoint).sessions


def _session(sessions: RoleSessions, tenant_id: str) -> RoleSession:
    session = sessions.session(aws.ROLE_ARN, tenant_id, time.time() + 10)
    assert isinstance(session, RoleSession)
    return session


def _verifies(arrived: dict[str, Any], session: RoleSession) -> bool:
    return verifies(arrived["method"], arrived["path"], arrived["headers"], arrived["body"].encode(),
                    session.access_key_id, session.secret_access_key, "eu-west-1", "lambda")


def _attempt(services: Services, sessions: RoleSessions, request: dict[str, Any], tenant_id: str) -> Outcome:
    target = HttpTarget(Connections(), services.settings, TenantSecrets(services), lambda run: None, sessions)
    run = StartedExecution(str(uuid.uuid4()), "job-1", tenant_id, datetime.now(timezone.utc), 1, request, {},
                           attempt_started_at=datetime.now(timezone.utc))
    prepared = target.prepare(run)
    prepared.fire()
    return target.judge(run, prepared.complete())


def test_a_signed_request_verifies_with_the_assumed_roles_session_and_its_token_is_redacted_from_the_answer(
    services: Services, target: Target, sessions: RoleSessions, db: Any,
) -> None:
    tenant_id = create_tenant(db, "signed")
    session = _session(sessions, tenant_id)  # kept: the attempt signs with this one
    target.response_body = f"echo {session.session_token}".encode()
    outcome = _attempt(services, sessions, {"method": "POST", "url": target.url + "/fn?b=2&a=1", "body": '{"at": 1}',
                                            "headers": {"Content-Type": "application/json"}, "auth": AUTH}, tenant_id)
    assert outcome.status_code == 200 and outcome.body == "echo ***"
    [arrived] = target.requests
    assert arrived["headers"]["X-Amz-Security-Token"] == session.session_token
    assert arrived["headers"]["Authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={session.access_key_id}/")
    assert _verifies(arrived, session)
    assert not verifies(arrived["method"], arrived["path"], arrived["headers"], b"{}", session.access_key_id,
                        session.secret_access_key, "eu-west-1", "lambda")  # the check can fail


def test_a_role_the_deployment_does_not_allow_is_a_refused_attempt_and_nothing_is_sent(
    services: Services, target: Target, moto_endpoint: str, db: Any,
) -> None:
    narrower = RoleSessions(lambda: aws.admin(moto_endpoint, "sts"), "arn:aws:iam::*:role/tickwork-target-other-*")
    outcome = _attempt(services, narrower, {"method": "GET", "url": target.url + "/fn", "auth": AUTH},
                       create_tenant(db, "refused"))
    assert outcome.failure is FailureKind.REFUSED and aws.ROLE_ARN in (outcome.error or "")
    assert target.requests == []


@pytest.fixture
def executor_aws(services: Services, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The executor's AWS access on moto's STS (it would use its own credentials' otherwise)."""
    key = (services.settings.target_role_pattern, services.settings.max_request_timeout_seconds)
    with ThreadPoolExecutor(2) as calls:
        monkeypatch.setitem(executor._aws, key, kinds.AwsAccess(aws.clients(moto_endpoint), calls))
        yield


def test_a_job_saved_with_auth_sends_signed_requests_and_nothing_stored_or_logged_holds_the_signature(
    api: Api, services: Services, target: Target, executor_aws: None, capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    use_settings(services, allow_private_targets=True)  # the target is on loopback
    now = datetime.now(timezone.utc).replace(microsecond=0)
    use_clock(now.timestamp)
    job = api.create(request={"url": target.url + "/fn", "body": '{"n": 1}', "headers": {}, "auth": AUTH},
                     retry={"strategy": "fixed", "max_attempts": 2, "delay_seconds": 1})
    assert job["request"]["auth"] == AUTH
    access = executor.aws_access(services.settings)
    session = _session(access.clients.sessions, api.tenant_id)
    target.response_body = f"echo {session.session_token}".encode()
    target.statuses = [500, 200]
    assert api.call("POST", f"/jobs/{job['id']}/run").status == 202
    clock = FakeClock(now)
    assert _run(services, job["id"], clock) == ["retrying"]
    clock.sleep(1)
    assert _run(services, job["id"], clock) == ["succeeded"]
    assert len(target.requests) == 2 and all(_verifies(arrived, session) for arrived in target.requests)
    signatures = [arrived["headers"]["Authorization"].rsplit("=", 1)[1] for arrived in target.requests]

    logs = "\n".join(json.dumps(vars(record), default=str) for record in caplog.records) + capsys.readouterr().out
    dump = _postgres_dump(services) + _redis_dump(services) + logs
    assert session.session_token not in dump and session.secret_access_key not in dump
    assert not any(signature in dump for signature in signatures)
    assert "AWS4-HMAC-SHA256" not in dump and aws.ROLE_ARN in dump  # the job (its role) was in what was searched
    assert executions(services, job["id"])[0][2] == "succeeded"


def test_auth_is_set_changed_and_removed_through_the_api_and_a_role_outside_the_pattern_is_a_400(api: Api) -> None:
    job = api.create(request={"url": "https://abc123.lambda-url.eu-west-1.on.aws/", "headers": {}})
    assert "auth" not in job["request"] or job["request"]["auth"] is None
    other = {**AUTH, "role_arn": aws.OTHER_ROLE_ARN}
    refused = api.call("PATCH", f"/jobs/{job['id']}", {"request": {"auth": other}})
    assert refused.status == 400 and refused.body["error"]["field"] == "request.auth.role_arn"
    patched = api.call("PATCH", f"/jobs/{job['id']}", {"request": {"auth": AUTH}})
    assert patched.status == 200 and patched.body["request"]["auth"] == AUTH
    changed = api.call("PATCH", f"/jobs/{job['id']}", {"request": {"timeout_seconds": 9}})
    assert changed.body["request"]["auth"] == AUTH and changed.body["request"]["timeout_seconds"] == 9
    removed = api.call("PATCH", f"/jobs/{job['id']}", {"request": {"auth": None}})
    assert removed.status == 200 and removed.body["request"].get("auth") is None
    unknown = api.call("PATCH", f"/jobs/{job['id']}", {"request": {"auth": {**AUTH, "type": "basic"}}})
    assert unknown.status == 400 and unknown.body["error"]["field"].startswith("request.auth")
