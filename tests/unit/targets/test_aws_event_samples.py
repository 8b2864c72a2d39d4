"""events/api_create_job_aws_target.json: the API Gateway event of `POST /jobs` with an AWS target, the sample
docs and handler tests start from. Its target is one the executor takes (tickwork.targetspec.aws) and its role
one the deployment's default pattern admits; the rest of the event is the HTTP job's (events/api_create_job.json).

The executor's own event is the same for every kind (events/executor_dispatch.json: the run's id, attempt and
instant); what it calls is read from the run.
"""
from __future__ import annotations

import json

from tests.conftest import load_event
from tickwork.settings import DEFAULT_TARGET_ROLE_PATTERN
from tickwork.targets.aws.credentials import role_refusal
from tickwork.targetspec.aws import AwsTargetSpec
from tickwork.vocab import TargetKind

SAMPLE = "api_create_job_aws_target.json"


def test_the_sample_target_is_a_fifo_queue_the_executor_takes() -> None:
    body = json.loads(load_event(SAMPLE)["body"])
    assert "request" not in body  # a job has a request or a target
    spec = AwsTargetSpec.from_dict(body["target"])
    assert spec.kind is TargetKind.AWS_SQS and spec.resource.endswith(".fifo")
    assert spec.to_dict() == body["target"]  # nothing in the sample is dropped or defaulted
    assert role_refusal(DEFAULT_TARGET_ROLE_PATTERN, spec.role_arn) is None


def test_the_sample_is_the_http_jobs_event_but_for_its_body() -> None:
    sample, http = load_event(SAMPLE), load_event("api_create_job.json")
    assert int(sample["headers"]["content-length"]) == len(sample["body"].encode())
    for event in (sample, http):
        del event["body"], event["headers"]["content-length"], event["requestContext"]["requestId"]
    assert sample == http
