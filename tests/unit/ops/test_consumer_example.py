"""docs/examples/consumer-stack.yaml, the stack docs/jobs-as-code.md shows: cfn-lint finds nothing in it,
and each Custom::TickworkJob it declares is a job the provider accepts, its properties as CloudFormation
sends them (every scalar a string)."""
from __future__ import annotations

import json
import re
from typing import Any

import pytest
from cfnlint.api import ManualArgs, lint
from cfnlint.decode import decode

from tests.conftest import ROOT
from tickwork.api.models import JobCreate
from tickwork.ops.job_properties import RESOURCE_TYPE, job_source, read_properties
from tickwork.store.keys import new_api_token

EXAMPLE = ROOT / "docs" / "examples" / "consumer-stack.yaml"
STACK_ID = "arn:aws:cloudformation:eu-west-3:123456789012:stack/reports/5b6a2e10-0000-11ef-0000-0a1b2c3d4e5f"


@pytest.fixture(scope="module")
def example() -> dict[str, Any]:
    template, matches = decode(str(EXAMPLE))
    assert not matches and template is not None, [str(m) for m in matches]
    return template


def test_cfn_lint_finds_nothing_including_informational_checks(example: dict[str, Any]) -> None:
    findings = lint(EXAMPLE.read_text(), config=ManualArgs(include_checks=["I"], regions=["eu-west-3"]))
    assert not findings, [str(f) for f in findings]


def test_it_declares_two_jobs_through_the_exported_service_token(example: dict[str, Any]) -> None:
    jobs = {name: res for name, res in example["Resources"].items() if res["Type"] == RESOURCE_TYPE}
    assert len(jobs) == 2
    for res in jobs.values():
        assert res["Properties"]["ServiceToken"] == {"Fn::ImportValue": {"Fn::Sub": "${TickworkStack}-JobsServiceToken"}}


def test_each_job_takes_its_key_from_a_no_echo_parameter_that_nothing_shows(example: dict[str, Any]) -> None:
    """CloudFormation hands a custom resource a {{resolve:secretsmanager:...}} reference unresolved: the key
    comes in as a NoEcho parameter, which NoEcho does not mask in Outputs or Metadata."""
    jobs = [res for res in example["Resources"].values() if res["Type"] == RESOURCE_TYPE]
    assert {json.dumps(res["Properties"]["ApiKey"]) for res in jobs} == {'{"Ref": "TickworkApiKey"}'}
    assert example["Parameters"]["TickworkApiKey"]["NoEcho"] is True
    assert "Default" not in example["Parameters"]["TickworkApiKey"]
    shown = json.dumps([example.get("Outputs"), example.get("Metadata"), [r.get("Metadata") for r in jobs]])
    assert "TickworkApiKey" not in shown


def test_each_job_is_one_the_provider_accepts_as_cloudformation_sends_it(example: dict[str, Any]) -> None:
    defaults = {name: str(p.get("Default", "tw_" + "k" * 43)) for name, p in example["Parameters"].items()}
    for name, res in example["Resources"].items():
        sent = _as_sent(res["Properties"], defaults)
        declared = read_properties(sent)
        assert declared.api_key is not None and re.fullmatch(
            example["Parameters"]["TickworkApiKey"]["AllowedPattern"], new_api_token()), name
        job = JobCreate.model_validate({**declared.body, "key": declared.key, "source": job_source(STACK_ID, name)})
        assert job.request.url.startswith(defaults["ReportsApiUrl"]), name
    sync = read_properties(_as_sent(example["Resources"]["HourlySync"]["Properties"], defaults)).body
    # The reference reaches Tickwork as written, for the executor to replace; header names are kept.
    assert sync["request"]["headers"] == {"Authorization": "Bearer ${secrets.SYNC_TOKEN}",
                                          "Content-Type": "application/json"}
    assert JobCreate.model_validate(sync).retry.max_attempts == 4


def _as_sent(value: Any, parameters: dict[str, str]) -> Any:
    """What CloudFormation hands the provider: intrinsics resolved, numbers and booleans as strings."""
    if isinstance(value, dict):
        if set(value) == {"Fn::Sub"} and isinstance(value["Fn::Sub"], str):
            return re.sub(r"\$\{(\w+)\}", lambda m: parameters[m.group(1)], value["Fn::Sub"])
        if set(value) == {"Fn::ImportValue"}:
            return "arn:aws:lambda:eu-west-3:123456789012:function:tickwork-JobsResourceFunction-AbC"
        if set(value) == {"Ref"}:
            return parameters[value["Ref"]]
        return {k: _as_sent(v, parameters) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_sent(v, parameters) for v in value]
    if isinstance(value, bool):
        return json.dumps(value)
    return value if isinstance(value, str) else str(value)
