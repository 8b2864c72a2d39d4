"""AWS targets in the SAM template: the roles they may name (TargetRolePattern, both branches of its condition), the
executor's one permission on its users' resources (sts:AssumeRole on those roles), and the VPC endpoints of the APIs
the targets call (AwsApiEndpoints). On the template as aws-sam-translator transforms it, offline.
"""
from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.unit.test_template import FUNCTIONS, _as_list, _statements
from tests.unit.test_template_operations import Stack
from tickwork.settings import DEFAULT_TARGET_ROLE_PATTERN
from tickwork.targets.aws.credentials import role_refusal

ACCOUNT = "111122223333"  # the account a deploy is in: ${AWS::AccountId}
PSEUDO = {"AWS::Partition": "aws", "AWS::AccountId": ACCOUNT, "AWS::Region": "eu-west-1"}
THIS_ACCOUNTS = f"arn:aws:iam::{ACCOUNT}:role/tickwork-target-*"
TWO_PATTERNS = "arn:aws:iam::444455556666:role/tickwork-target-*,arn:aws:iam::*:role/scheduled/orders-?"
TARGET_SERVICES = {"sts", "sqs", "sns", "events", "lambda", "states"}
# AWS's managed policies SAM attaches to every function: its logs and its VPC network interfaces.
SAM_MANAGED = {"arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
               "arn:aws:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole"}


def resolved(stack: Stack, node: Any) -> Any:
    """`stack.value`, with the pseudo parameters of Fn::Sub filled in as CloudFormation does at deploy time."""
    def pseudo(node: Any) -> Any:
        if isinstance(node, dict):
            if isinstance(node.get("Fn::Sub"), str):
                return {"Fn::Sub": re.sub(r"\$\{(AWS::\w+)\}", lambda m: PSEUDO[m.group(1)], node["Fn::Sub"])}
            return {key: pseudo(value) for key, value in node.items()}
        return [pseudo(item) for item in node] if isinstance(node, list) else node
    return stack.value(pseudo(node))


def assume_role_statements(stack: Stack) -> list[tuple[str, dict[str, Any]]]:
    return [(name, s) for name, s in _statements(stack.template) if "sts:AssumeRole" in _as_list(s["Action"])
            and "Principal" not in s]


def role_of(stack: Stack, function: str) -> str:
    return str(stack.template["Resources"][function]["Properties"]["Role"]["Fn::GetAtt"][0])


def test_only_the_executor_may_assume_target_roles_and_nothing_else_with_that_statement() -> None:
    stack = Stack()
    ((owner, statement),) = assume_role_statements(stack)
    assert owner == role_of(stack, "ExecutorFunction")
    assert statement["Effect"] == "Allow" and _as_list(statement["Action"]) == ["sts:AssumeRole"]
    assert set(statement) == {"Sid", "Effect", "Action", "Resource"}  # no NotResource, no NotAction


@pytest.mark.parametrize(("given", "patterns"), [
    ("", [THIS_ACCOUNTS]),  # the empty default: this account's tickwork-target-* roles, built with !Sub
    (TWO_PATTERNS, TWO_PATTERNS.split(",")),
])
def test_the_executor_assumes_exactly_the_roles_of_the_pattern_the_functions_check(given: str,
                                                                                   patterns: list[str]) -> None:
    stack = Stack(TargetRolePattern=given)
    assert stack.condition("DefaultTargetRolePattern") is (given == "")
    ((_, statement),) = assume_role_statements(stack)
    assert _as_list(resolved(stack, statement["Resource"])) == patterns
    for function in FUNCTIONS:  # the API refuses at save time what the executor would refuse to assume
        env = stack.template["Resources"][function]["Properties"]["Environment"]["Variables"]
        assert resolved(stack, env["TICKWORK_TARGET_ROLE_PATTERN"]) == ",".join(patterns), function


def test_the_default_pattern_admits_this_accounts_target_roles_only() -> None:
    stack = Stack()
    ((_, statement),) = assume_role_statements(stack)
    (pattern,) = _as_list(resolved(stack, statement["Resource"]))
    assert role_refusal(pattern, f"arn:aws:iam::{ACCOUNT}:role/tickwork-target-orders") is None
    for other in (f"arn:aws:iam::{ACCOUNT}:role/admin", "arn:aws:iam::444455556666:role/tickwork-target-orders"):
        assert role_refusal(pattern, other) is not None
    # Locally and in tests (no account to name) any account's tickwork-target-* roles.
    assert DEFAULT_TARGET_ROLE_PATTERN == "arn:aws:iam::*:role/tickwork-target-*"


@pytest.mark.parametrize(("given", "accepted"), [
    ("", True), (THIS_ACCOUNTS, True), (TWO_PATTERNS, True), ("arn:aws-cn:iam::*:role/path/x-*", True),
    ("*", False), ("arn:aws:iam::*:*", False), ("arn:aws:sts::111122223333:assumed-role/x", False),
    ("arn:aws:iam::*:role/a-*, arn:aws:iam::*:role/b-*", False),  # a space would be part of the policy's ARN
    ("arn:aws:iam::*:role/a-*,", False),
])
def test_the_parameter_takes_role_arns_only(given: str, accepted: bool) -> None:
    parameter = Stack().template["Parameters"]["TargetRolePattern"]
    assert parameter["Default"] == ""
    assert bool(re.fullmatch(parameter["AllowedPattern"], given)) is accepted


def _mentions_a_stack_resource(node: Any, resources: set[str]) -> bool:
    text = json.dumps(node)
    names = re.findall(r'"Ref": "([A-Za-z0-9]+)"', text) + re.findall(r'"Fn::GetAtt": \["([A-Za-z0-9]+)"', text)
    return bool(names) and set(names) <= resources


def test_the_executor_holds_no_other_permission_on_resources_outside_the_stack() -> None:
    stack = Stack()
    resources = stack.template["Resources"]
    role = resources[role_of(stack, "ExecutorFunction")]["Properties"]
    managed = [p for p in role["ManagedPolicyArns"] if isinstance(p, str)]
    assert set(managed) <= SAM_MANAGED
    documents = [p["PolicyDocument"] for p in role["Policies"]]
    documents += [resources[p["Ref"]]["Properties"]["PolicyDocument"] for p in role["ManagedPolicyArns"]
                  if isinstance(p, dict)]
    statements = [s for d in documents for s in d["Statement"]]
    assert len(statements) >= 5
    for statement in statements:
        if statement.get("Sid") == "AssumeTargetRoles":
            continue
        assert _mentions_a_stack_resource(statement["Resource"], set(resources)), statement


def interface_endpoints(stack: Stack) -> list[dict[str, Any]]:
    return [r["Properties"] for r in stack.resources().values()
            if r["Type"] == "AWS::EC2::VPCEndpoint" and r["Properties"]["VpcEndpointType"] == "Interface"]


def test_no_aws_api_endpoints_by_default() -> None:
    assert Stack().template["Parameters"]["AwsApiEndpoints"]["Default"] == "Off"
    assert not interface_endpoints(Stack())


def test_interface_endpoints_serve_the_target_apis_to_the_functions_only() -> None:
    stack = Stack(AwsApiEndpoints="Interface")
    endpoints = interface_endpoints(stack)
    services = {resolved(stack, e["ServiceName"]) for e in endpoints}
    assert services == {f"com.amazonaws.eu-west-1.{s}" for s in TARGET_SERVICES}
    for endpoint in endpoints:
        assert endpoint["VpcEndpointType"] == "Interface" and endpoint["PrivateDnsEnabled"] is True
        assert endpoint["SubnetIds"] == [{"Ref": "PrivateSubnetA"}, {"Ref": "PrivateSubnetB"}]
        assert endpoint["SecurityGroupIds"] == [{"Ref": "AwsApiEndpointSecurityGroup"}]
    group = stack.resources()["AwsApiEndpointSecurityGroup"]["Properties"]
    (ingress,) = group["SecurityGroupIngress"]
    assert (ingress["IpProtocol"], ingress["FromPort"], ingress["ToPort"]) == ("tcp", 443, 443)
    assert ingress["SourceSecurityGroupId"] == {"Ref": "FunctionSecurityGroup"}
    (egress,) = group["SecurityGroupEgress"]
    assert egress["CidrIp"] == "127.0.0.1/32" and egress["IpProtocol"] == "icmp"


def test_an_existing_network_gets_no_endpoints_its_owner_did_not_make() -> None:
    stack = Stack(AwsApiEndpoints="Interface", SubnetIds="subnet-1,subnet-2", SecurityGroupIds="sg-1")
    assert not stack.condition("CreateAwsApiEndpoints")
    assert not interface_endpoints(stack)


def test_the_principal_target_roles_trust_is_an_output() -> None:
    stack = Stack()
    output = stack.template["Outputs"]["ExecutorRoleArn"]["Value"]
    assert output == {"Fn::GetAtt": [role_of(stack, "ExecutorFunction"), "Arn"]}
