"""What AWS receives: template.yaml as SAM transforms it, linted by cfn-lint and scanned by checkov, every
finding fixed in the template or reviewed in tests/unit/template_findings.py; and the parameters whose
ranges must fit the resources made from them.

`sam deploy` hands CloudFormation the template with its Transform; CloudFormation expands it (as
samtranslator does here, offline) and each service then checks what it gets against its own limits. Lint
on the source alone misses what SAM generates or copies, e.g. a function Description over Lambda's 256
characters, found only after the transform.
"""
from __future__ import annotations

import ipaddress
import json
import math
import os
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any, Iterator

import pytest
from cfnlint.api import ManualArgs, lint

from tests.unit.template_findings import CFN_LINT_KNOWN, CHECKOV_SKIPPED
from tests.unit.test_template import ROOT, TEMPLATE
from tests.unit.test_template_operations import transformed

CHECKOV = ROOT / ".venv-checkov" / "bin" / "checkov"
CHECKOV_REQUIREMENTS = Path(__file__).with_name("checkov-requirements.txt")
# SAM resolves only Tracing from the parameters (its Globals say `Tracing: !Ref Tracing`); every other
# parameter stays a condition in the output. So these two transforms are every template AWS can receive.
PARAMETER_SETS = {"defaults": {}, "tracing": {"Tracing": "Active"}}
# AWS's own bounds of a VPC's CIDR block.
VPC_PREFIXES = range(16, 29)


def _templates() -> dict[str, dict[str, Any]]:
    return {name: transformed(**params) for name, params in PARAMETER_SETS.items()}


def _cfn_lint_findings(templates: dict[str, dict[str, Any]]) -> set[tuple[str, str, str]]:
    """(rule, resource or parameter, message) of every finding, informational ones included."""
    found = set()
    for template in templates.values():
        for match in lint(json.dumps(template), config=ManualArgs(include_checks=["I"], regions=["us-east-1"])):
            path = [str(part) for part in match.path or []]
            found.add((match.rule.id, path[1] if len(path) > 1 else "/".join(path), match.message))
    return found


def _checkov_command() -> list[str]:
    pinned = next(line for line in CHECKOV_REQUIREMENTS.read_text().splitlines() if line.startswith("checkov=="))
    if not CHECKOV.exists():
        pytest.fail(f"{CHECKOV} is missing: `make .venv-checkov/.installed` installs {pinned}")
    version = subprocess.run([str(CHECKOV), "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
    assert pinned == f"checkov=={version}", f"{CHECKOV} is {version}: `make .venv-checkov/.installed` installs {pinned}"
    return [str(CHECKOV), "--output", "json", "--framework", "cloudformation", "--skip-download"]


@pytest.fixture(scope="module")
def scans(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Both scanners over every transform: checkov once, as a process of its own (about 10 s: it loads
    every check it has), and cfn-lint in this one meanwhile."""
    templates = _templates()
    folder = tmp_path_factory.mktemp("transformed")
    files = []
    for name, template in templates.items():
        files.append(folder / f"{name}.json")
        files[-1].write_text(json.dumps(template, indent=1))
    env = {k: v for k, v in os.environ.items() if k != "LOG_LEVEL"}  # checkov reads it too
    checkov = subprocess.Popen([*_checkov_command(), *(arg for f in files for arg in ("--file", str(f)))],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=folder)
    try:
        cfn_lint = _cfn_lint_findings(templates)
        out, err = checkov.communicate(timeout=300)
    finally:
        checkov.kill()
    assert out.strip(), f"checkov printed nothing (rc={checkov.returncode}): {err}"
    yield {"cfn_lint": cfn_lint, "checkov": json.loads(out), "files": len(files)}


def test_cfn_lint_finds_nothing_in_the_transformed_template_beyond_the_reviewed_list(scans: dict[str, Any]) -> None:
    findings = scans["cfn_lint"]
    unknown = sorted(f for f in findings if f[:2] not in CFN_LINT_KNOWN)
    assert not unknown, "fix these in template.yaml (or review them into template_findings.py):\n" + "\n".join(
        f"{rule} {resource}: {message}" for rule, resource, message in unknown)
    stale = set(CFN_LINT_KNOWN) - {f[:2] for f in findings}
    assert not stale, f"no longer reported, take them out of CFN_LINT_KNOWN: {sorted(stale)}"


def test_checkov_finds_nothing_outside_the_reviewed_baseline(scans: dict[str, Any]) -> None:
    report = scans["checkov"]
    summary = report["summary"]
    assert summary["parsing_errors"] == 0 and summary["resource_count"] >= 80 * scans["files"], summary
    failed = {(c["check_id"], c["resource"].rsplit(".", 1)[-1]): c["check_name"]
              for c in report["results"]["failed_checks"]}
    unknown = sorted(f"{check} {resource}: {name}" for (check, resource), name in failed.items()
                     if (check, resource) not in CHECKOV_SKIPPED)
    assert not unknown, "fix these in template.yaml (or skip them in template_findings.py, with a reason):\n" + \
        "\n".join(unknown)
    stale = set(CHECKOV_SKIPPED) - set(failed)
    assert not stale, f"these pass now, take them out of CHECKOV_SKIPPED: {sorted(stale)}"


def test_every_reviewed_finding_says_why_in_one_line() -> None:
    for reason in [*CFN_LINT_KNOWN.values(), *CHECKOV_SKIPPED.values()]:
        assert 20 < len(reason) <= 200 and "\n" not in reason, reason


# ------------------------------------------------------------------------------------ parameter ranges


def _subnet_splits(template: dict[str, Any]) -> dict[str, tuple[int, int, int]]:
    """Each created subnet's block as `!Select [index, !Cidr [VpcCidr, count, host bits]]` names it."""
    splits = {}
    for name, res in template["Resources"].items():
        if res["Type"] == "AWS::EC2::Subnet":
            index, split = res["Properties"]["CidrBlock"]["Fn::Select"]
            cidr, count, bits = split["Fn::Cidr"]
            assert cidr == {"Ref": "VpcCidr"}, name
            splits[name] = (index, count, bits)
    return splits


def test_vpc_cidr_accepts_exactly_the_blocks_its_four_subnets_fit_in() -> None:
    template = transformed()
    param = template["Parameters"]["VpcCidr"]
    splits = _subnet_splits(template)
    assert len(splits) == 4
    # `count` blocks of 2^bits addresses each: the VPC's prefix can be this long at most.
    longest = min(32 - bits - math.ceil(math.log2(count)) for _, count, bits in splits.values())
    pattern = re.compile(param["AllowedPattern"])
    accepted = {prefix for prefix in range(33) if pattern.fullmatch(f"10.40.0.0/{prefix}")}
    assert accepted == set(range(VPC_PREFIXES.start, longest + 1)), (accepted, splits)
    assert pattern.fullmatch(param["Default"])
    assert f"/{VPC_PREFIXES.start} and /{longest}" in param["ConstraintDescription"]
    for prefix in accepted:  # split as Fn::Cidr splits it, every subnet's block exists
        vpc = ipaddress.ip_network(f"10.40.0.0/{prefix}")
        for name, (index, count, bits) in splits.items():
            assert len(list(vpc.subnets(new_prefix=32 - bits))) >= count > index, (prefix, name)


def test_the_created_database_grows_its_storage_before_it_fills_up() -> None:
    template = transformed()
    params = template["Parameters"]
    # RDS refuses a maximum less than 10 % above the allocated storage.
    assert params["DatabaseMaxAllocatedStorage"]["Default"] >= 1.1 * params["DatabaseAllocatedStorage"]["Default"]
    assert params["DatabaseMaxAllocatedStorage"]["MaxValue"] == params["DatabaseAllocatedStorage"]["MaxValue"]
    assert template["Resources"]["Database"]["Properties"]["MaxAllocatedStorage"] == {
        "Fn::If": ["AutoscaleDatabaseStorage", {"Ref": "DatabaseMaxAllocatedStorage"}, {"Ref": "AWS::NoValue"}]}
    assert template["Conditions"]["AutoscaleDatabaseStorage"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "DatabaseMaxAllocatedStorage"}, 0]}]}


def test_the_operator_topics_are_encrypted_with_a_key_cloudwatch_and_the_publishers_may_use() -> None:
    resources = transformed()["Resources"]
    key = resources["OperatorTopicKey"]["Properties"]
    for topic in ("OperatorTopic", "RunFailuresTopic"):  # the alarms', and the runs that failed for good
        assert resources[topic]["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": ["OperatorTopicKey", "Arn"]}
    assert key["EnableKeyRotation"] is True
    statements = {s["Sid"]: s for s in key["KeyPolicy"]["Statement"]}
    assert statements["CloudWatchAlarmsPublish"]["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    assert "aws:SourceAccount" in statements["CloudWatchAlarmsPublish"]["Condition"]["StringEquals"]
    assert set(statements["PublishersUseThroughSns"]["Condition"]["StringEquals"]) == {
        "kms:CallerAccount", "kms:ViaService"}
    attached = {"Ref": "OperatorTopicKeyUsePolicy"}
    for function in ("PollerFunction", "ExecutorFunction"):  # the two that publish (OPERATOR_TOPIC_ARN)
        role = resources[function]["Properties"]["Role"]["Fn::GetAtt"][0]
        assert attached in resources[role]["Properties"]["ManagedPolicyArns"], function
        assert "OPERATOR_TOPIC_ARN" in resources[function]["Properties"]["Environment"]["Variables"]


# ------------------------------------------------------------------------------ other limits at deploy


# A template body CloudFormation takes inline, and one it reads from S3.
INLINE_TEMPLATE_BYTES, S3_TEMPLATE_BYTES = 51_200, 1_000_000
# Lambda's bound on a function's environment (names and values together), and a generous bound on what
# one intrinsic value (an endpoint, an ARN, a URL built from them) resolves to.
ENVIRONMENT_BYTES, RESOLVED_VALUE_BYTES = 4096, 256


def test_the_template_reaches_cloudformation_through_s3_as_every_environment_deploys() -> None:
    size = max(len(TEMPLATE.read_bytes()), len(json.dumps(transformed()).encode()))
    assert size < S3_TEMPLATE_BYTES
    if size > INLINE_TEMPLATE_BYTES:  # sam deploy refuses it without a bucket to upload it to
        for name, environment in tomllib.loads((ROOT / "samconfig.toml").read_text()).items():
            if isinstance(environment, dict) and "deploy" in environment:
                deploy = environment["deploy"]["parameters"]
                assert deploy.get("resolve_s3") is True or deploy.get("s3_bucket"), name


def test_every_function_environment_fits_lambdas_limit() -> None:
    template = transformed(Tracing="Active")
    for name, res in template["Resources"].items():
        if res["Type"] == "AWS::Lambda::Function":
            variables = res["Properties"]["Environment"]["Variables"]
            size = sum(len(key) + _resolved_bytes(value, template["Parameters"]) for key, value in variables.items())
            assert size < ENVIRONMENT_BYTES, (name, size)


def _resolved_bytes(value: Any, parameters: dict[str, Any]) -> int:
    """The most a value can resolve to: a literal's length; a reference to a parameter that can only be one of
    its allowed values, or a number, the longest of those; either branch of a condition; anything else
    RESOLVED_VALUE_BYTES."""
    if isinstance(value, (str, int)):
        return len(str(value))
    if "Fn::If" in value:
        return max(_resolved_bytes(branch, parameters) for branch in value["Fn::If"][1:])
    parameter = parameters.get(value.get("Ref", ""), {})
    if parameter.get("AllowedValues"):
        return max(len(str(allowed)) for allowed in parameter["AllowedValues"])
    if parameter.get("Type") == "Number":
        return 20
    return RESOLVED_VALUE_BYTES

