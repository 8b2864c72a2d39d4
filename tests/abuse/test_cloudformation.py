"""CloudFormation acting for another tenant (issue 31, item 4): whoever can deploy a stack in the account (or
invoke the provider with an event of their own) declares Custom::TickworkJob resources. The hostile tenant tries
to create a job in the benign tenant's name, to take or delete the benign tenant's stack-managed job from a
stack of its own, and to have the provider answer a URL of its choosing: each is refused and the benign
tenant's jobs are as they were, its every-second job on time meanwhile."""
from __future__ import annotations

import json
import time
import uuid
from typing import Any, Callable, Iterator

import pytest

from tests.abuse.conftest import Arena
from tests.conftest import Target, load_event
from tickwork.ops.job_resource import handle_job_resource
from tickwork.ops.response_url import ResponseHosts

pytestmark = [pytest.mark.slow, pytest.mark.realtime]

BENIGN_STACK = "arn:aws:cloudformation:eu-west-3:123456789012:stack/benign/7c1d2e30-0000-11ef-0000-0a1b2c3d4e5f"
HOSTILE_STACK = "arn:aws:cloudformation:eu-west-3:123456789012:stack/benign/00000000-dead-beef-0000-000000000000"
Provider = Callable[[dict[str, Any]], dict[str, Any]]


@pytest.fixture(scope="module")
def answers() -> Iterator[Target]:
    """CloudFormation's response bucket, played by a local server (the deployed provider answers only S3's)."""
    target = Target()
    yield target
    target.close()


@pytest.fixture(scope="module")
def provider(arena: Arena, answers: Target) -> Provider:
    hosts = ResponseHosts(also=(answers.url,))
    services = arena.runtime._services
    assert services is not None
    return lambda event: handle_job_resource(lambda: services, event, 30.0, hosts=hosts)


def _event(answers: Target, request_type: str, stack: str, **properties: Any) -> dict[str, Any]:
    event = load_event("jobs_resource_create.json")
    event.update(RequestType=request_type, RequestId=str(uuid.uuid4()), StackId=stack,
                 ResponseURL=f"{answers.url}/response?X-Amz-Signature=0000")
    event["ResourceProperties"].update(properties)
    return event


def _benign_job(arena: Arena, key: str) -> dict[str, Any] | None:
    status, job = arena.benign("GET", f"/jobs/by-key/{key}")
    return job if status == 200 else None


def test_a_stack_cannot_act_for_another_tenant(arena: Arena, provider: Provider, answers: Target) -> None:
    started = time.time()
    benign = {"Tenant": arena.runtime.tenant_id, "ApiKey": arena.benign_key, "Key": "stack-report"}
    created = provider(_event(answers, "Create", BENIGN_STACK, **benign))
    assert created["Status"] == "SUCCESS", created
    before = _benign_job(arena, "stack-report")
    assert before is not None

    # No key, or the hostile tenant's own key, in the benign tenant's name: refused, nothing made.
    for properties in ({"ApiKey": ""}, {"ApiKey": arena.hostile_key}):
        refused = provider(_event(answers, "Create", HOSTILE_STACK, **{**benign, **properties, "Key": "planted"}))
        assert refused["Status"] == "FAILED" and refused["Reason"].split(":")[0] in ("ApiKey", "Tenant"), refused
    assert _benign_job(arena, "planted") is None

    # The benign job's resource, replaced or deleted from another stack: the job stays as it was.
    update = _event(answers, "Update", HOSTILE_STACK, **{**benign, "ApiKey": arena.hostile_key, "Name": "taken"})
    update["PhysicalResourceId"] = created["PhysicalResourceId"]
    assert provider(update)["Status"] == "FAILED"
    delete = _event(answers, "Delete", HOSTILE_STACK, **{**benign, "ApiKey": ""})
    delete["PhysicalResourceId"] = created["PhysicalResourceId"]
    provider(delete)  # a stack can always be deleted: answered, touching nothing of another stack's
    assert _benign_job(arena, "stack-report") == before

    # An event answering a URL of the hostile tenant's: refused before any work, and nothing is sent there.
    forged = _event(answers, "Create", HOSTILE_STACK, ApiKey=arena.hostile_key, Tenant=arena.hostile_tenant,
                    Key="exfiltrate")
    forged["ResponseURL"] = arena.target.url + "/hostile/response"
    sent_before = len(arena.target.requests)
    assert handle_job_resource(lambda: arena.runtime._services, forged, 30.0)["Status"] == "FAILED"
    assert not [r for r in arena.target.requests[sent_before:] if r["path"].startswith("/hostile/response")]
    assert arena.hostile("GET", "/jobs/by-key/exfiltrate")[0] == 404
    assert all(json.loads(r["body"])["Status"] in ("SUCCESS", "FAILED") for r in answers.requests)
    arena.assert_benign_on_time(started)
