"""A job's AWS target through the API: exactly one of request and target, and each save-time check a 400 naming its
field (the spec's own, the deployment's role pattern, the input's worst case once rendered). Nothing is called."""
from __future__ import annotations

import json
from typing import Any

import pytest

from tests import aws
from tests.conftest import load_event
from tests.integration.api_client import Api, job_body

QUEUE = f"arn:aws:sqs:{aws.REGION}:{aws.ACCOUNT}:orders"
TARGET = {"arn": QUEUE, "role_arn": aws.ROLE_ARN}


def _body(target: dict[str, Any] | None) -> dict[str, Any]:
    """The example job's body with `target` instead of its request (None: with neither)."""
    body = {name: value for name, value in job_body().items() if name != "request"}
    return body if target is None else {**body, "target": target}


@pytest.mark.parametrize(("body", "field"), [
    pytest.param(job_body(target=TARGET), "target", id="both"),
    pytest.param(_body(None), "request", id="neither"),
    pytest.param(_body({**TARGET, "dead_letter_config": {}}), "target.dead_letter_config", id="scheduler-field"),
    pytest.param(_body({**TARGET, "arn": "arn:aws:kinesis:us-east-1:1:stream/s"}), "target.arn", id="unknown-service"),
    pytest.param(_body({**TARGET, "role_arn": aws.OTHER_ROLE_ARN}), "target.role_arn", id="role-outside-pattern"),
    pytest.param(_body({**TARGET, "input": "${secrets.A}" * 200}), "target.input", id="input-over-limit"),
    pytest.param(_body({**TARGET, "timeout_seconds": 10_000}), "target.timeout_seconds", id="timeout"),
])
def test_a_target_that_cannot_be_saved_is_a_400_naming_its_field(api: Api, body: dict[str, Any], field: str) -> None:
    reply = api.call("POST", "/jobs", body)
    assert (reply.status, reply.body["error"]["field"]) == (400, field), reply.body


def test_a_target_is_replaced_by_patch_and_a_request_is_refused_on_its_job(api: Api) -> None:
    job = api.call("POST", "/jobs", _body(TARGET)).body
    fifo = {"arn": QUEUE + ".fifo", "role_arn": aws.ROLE_ARN, "sqs_parameters": {"message_group_id": "g1"}}
    patched = api.call("PATCH", f"/jobs/{job['id']}", {"target": fifo})
    assert (patched.status, patched.body["target"]["sqs_parameters"], patched.body["request"]) == (
        200, {"message_group_id": "g1"}, None), patched.body
    refused = api.call("PATCH", f"/jobs/{job['id']}", {"request": {"url": "https://example.com/"}})
    assert (refused.status, refused.body["error"]["field"]) == (400, "request"), refused.body


def test_the_aws_target_event_as_shipped_creates_its_job(api: Api, handler: Any) -> None:
    event = load_event("api_create_job_aws_target.json")
    reply = Api._reply(handler("api")(event, None))
    assert reply.status == 201, reply.body
    shown = {name: value for name, value in reply.body["target"].items() if value is not None}  # other kinds': null
    assert (shown, reply.body["request"]) == (json.loads(event["body"])["target"], None)
