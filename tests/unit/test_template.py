"""Static checks of the SAM template: cfn-lint finds nothing, and the shape the runtime relies on holds.

No AWS access: cfn-lint runs locally, the rest reads template.yaml with cfn-lint's own decoder (which
understands the short intrinsic tags) and, for what SAM generates (roles, policies), the template as
aws-sam-translator transforms it, offline.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from cfnlint.api import lint
from cfnlint.decode import decode

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
FUNCTIONS = {"ApiFunction": "api", "PollerFunction": "poller", "ExecutorFunction": "executor",
             "JobsResourceFunction": "jobs_resource"}
EXPRESS_MAX_SECONDS = 300

@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    tpl, matches = decode(str(TEMPLATE))
    assert not matches, [str(m) for m in matches]
    assert tpl is not None
    return tpl


@pytest.fixture(scope="module")
def resources(template: dict[str, Any]) -> dict[str, Any]:
    return template["Resources"]


class _NoManagedPolicies:
    """The translator asks IAM for managed policy names only when a template uses them by name."""

    def load(self) -> dict[str, str]:
        return {}


@pytest.fixture(scope="module")
def transformed(template: dict[str, Any]) -> dict[str, Any]:
    """The CloudFormation template SAM deploys, with code locations as `sam package` would set them."""
    from samtranslator.translator.transform import transform

    copy = json.loads(json.dumps(template))
    for name, res in copy["Resources"].items():
        for key in ("CodeUri", "ContentUri"):
            if key in res.get("Properties", {}):
                res["Properties"][key] = f"s3://artifacts/{name}.zip"
    with mock.patch.dict(os.environ, {"AWS_DEFAULT_REGION": "us-east-1"}):
        return transform(copy, {}, _NoManagedPolicies())


def function_props(template: dict[str, Any], name: str) -> dict[str, Any]:
    """A function's properties with SAM Globals merged in the way SAM merges them."""
    merged: dict[str, Any] = dict(template.get("Globals", {}).get("Function", {}))
    for key, value in template["Resources"][name]["Properties"].items():
        if key == "Layers":
            merged[key] = list(merged.get(key, [])) + list(value)
        elif key == "Environment":
            variables = dict(merged.get(key, {}).get("Variables", {}))
            variables.update(value.get("Variables", {}))
            merged[key] = {"Variables": variables}
        else:
            merged[key] = value
    return merged


def serverless_functions(resources: dict[str, Any]) -> list[str]:
    return [name for name, res in resources.items() if res["Type"] == "AWS::Serverless::Function"]


# ------------------------------------------------------------------------------------------ lint


def cfn_lint_command() -> list[str]:
    beside = Path(sys.executable).parent / "cfn-lint"
    if beside.exists():
        return [str(beside)]
    found = shutil.which("cfn-lint")
    if found:
        return [found]
    pytest.fail("cfn-lint is not installed: pip install -e '.[dev]'")


def test_cfn_lint_reports_nothing_including_informational_checks() -> None:
    # The informational checks include I3011: explicit deletion policies on every stateful resource.
    proc = subprocess.run(
        [*cfn_lint_command(), "--format", "json", "--include-checks", "I", "--", str(TEMPLATE)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert proc.stdout.strip(), f"cfn-lint printed nothing (rc={proc.returncode}): {proc.stderr}"
    findings = json.loads(proc.stdout)
    assert not findings, json.dumps(findings, indent=1)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_state_machine_definition_passes_cfn_lint(resources: dict[str, Any]) -> None:
    """cfn-lint does not look inside an inline SAM Definition; lint it as a plain state machine."""
    props = resources["TickLoop"]["Properties"]
    synthetic = {"Resources": {"TickLoop": {"Type": "AWS::StepFunctions::StateMachine", "Properties": {
        "RoleArn": "arn:aws:iam::123456789012:role/tick-loop",
        "StateMachineType": props["Type"],
        "Definition": json.loads(json.dumps(props["Definition"])),
        "DefinitionSubstitutions": {
            "PollerFunctionArn": "arn:aws:lambda:us-east-1:123456789012:function:poller",
            "TickLoopSeconds": "70",
        },
    }}}}
    findings = [m for m in lint(json.dumps(synthetic)) if m.rule.id.startswith("E")]
    assert not findings, [str(m) for m in findings]


# ------------------------------------------------------------------------------------ functions


def test_the_functions_exist(resources: dict[str, Any]) -> None:
    assert set(FUNCTIONS) <= set(serverless_functions(resources))


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_function_is_python313_arm64_with_common_layer(template: dict[str, Any], name: str) -> None:
    props = function_props(template, name)
    assert props["Runtime"] == "python3.13"
    assert props["Architectures"] == ["arm64"]
    assert props["Handler"] == "app.handler"
    assert {"Ref": "CommonLayer"} in props["Layers"]
    assert props["CodeUri"] == f"functions/{FUNCTIONS[name]}"
    assert (ROOT / props["CodeUri"]).is_dir()


PRIVATE_SUBNETS = [{"Ref": "PrivateSubnetA"}, {"Ref": "PrivateSubnetB"}]


def test_every_function_gets_the_shared_environment_and_vpc(template: dict[str, Any]) -> None:
    for name in serverless_functions(template["Resources"]):
        props = function_props(template, name)
        env = props["Environment"]["Variables"]
        # The database's address and the ARN of the secret with its login (created or existing), never
        # a password or a URL that could carry one.
        assert env["DATABASE_SECRET_ARN"] == {"Fn::If": [
            "CreateDatabase", {"Fn::GetAtt": ["Database", "MasterUserSecret.SecretArn"]}, {"Ref": "DatabaseSecretArn"}]}
        # RDS Proxy's endpoint when it is on (tests/unit/test_template_operations.py checks that side).
        assert env["DATABASE_HOST"] == {"Fn::If": ["UseProxy", {"Fn::GetAtt": ["DatabaseProxy", "Endpoint"]}, {"Fn::If": [
            "CreateDatabase", {"Fn::GetAtt": ["Database", "Endpoint.Address"]}, {"Ref": "DatabaseHost"}]}]}
        assert env["DATABASE_PORT"] == {"Fn::If": [
            "CreateDatabase", {"Fn::GetAtt": ["Database", "Endpoint.Port"]}, {"Ref": "DatabasePort"}]}
        assert env["DATABASE_NAME"] == {"Ref": "DatabaseName"}, name
        assert not [k for k in env if "PASSWORD" in k or k == "DATABASE_URL"], name
        # TLS and cluster mode either way (tickwork.wiring.connect_redis reads "rediss+cluster").
        assert env["REDIS_URL"] == {"Fn::If": [
            "CreateServerlessCache",
            {"Fn::Sub": "rediss+cluster://${Cache.Endpoint.Address}:${Cache.Endpoint.Port}"},
            {"Fn::If": [
                "CreateNodeCache",
                {"Fn::Sub": "rediss+cluster://${NodeCache.ConfigurationEndPoint.Address}:"
                            "${NodeCache.ConfigurationEndPoint.Port}"},
                {"Ref": "RedisUrl"},
            ]},
        ]}, name
        assert env["TICKWORK_NAMESPACE"] == "tickwork", name
        assert env["LOG_LEVEL"] == {"Ref": "LogLevel"}, name
        assert env["POWERTOOLS_SERVICE_NAME"], name
        assert props["VpcConfig"] == {
            "SubnetIds": {"Fn::If": ["CreateNetwork", PRIVATE_SUBNETS, {"Ref": "SubnetIds"}]},
            "SecurityGroupIds": {"Fn::If": ["CreateNetwork", [{"Ref": "FunctionSecurityGroup"}], {"Ref": "SecurityGroupIds"}]},
        }, name


def test_every_parameter_has_a_default_so_the_complete_stack_needs_no_answer(template: dict[str, Any]) -> None:
    params = template["Parameters"]
    assert not [name for name, p in params.items() if "Default" not in p]
    conditions = template["Conditions"]
    assert conditions["CreateNetwork"] == {"Fn::Equals": [{"Fn::Join": ["", {"Ref": "SubnetIds"}]}, ""]}
    assert conditions["CreateDatabase"] == {"Fn::Equals": [{"Ref": "DatabaseHost"}, ""]}
    assert conditions["CreateCache"] == {"Fn::Equals": [{"Ref": "RedisUrl"}, ""]}
    # sam deploy --guided prompts a NoEcho parameter without its default and refuses an empty answer.
    assert not [name for name, p in params.items() if p.get("NoEcho")]
    assert params["DatabaseHost"]["Default"] == "" and params["DatabaseSecretArn"]["Default"] == ""
    assert params["RedisUrl"]["Default"] == "" and params["SubnetIds"]["Default"] == ""
    redis_pattern = re.compile(params["RedisUrl"]["AllowedPattern"])
    assert redis_pattern.fullmatch("rediss+cluster://tickwork-x.serverless.use1.cache.amazonaws.com:6379")
    assert redis_pattern.fullmatch("")
    assert not redis_pattern.fullmatch("https://example.com")
    secret_pattern = re.compile(params["DatabaseSecretArn"]["AllowedPattern"])
    assert secret_pattern.fullmatch("") and secret_pattern.fullmatch(
        "arn:aws:secretsmanager:eu-west-1:123456789012:secret:rds!db-0a1b2c3d-AbCdEf")
    assert not secret_pattern.fullmatch("postgresql://u:p@h:5432/d")


def test_poller_can_invoke_the_executor(template: dict[str, Any]) -> None:
    props = function_props(template, "PollerFunction")
    assert props["Timeout"] <= 15 and props["MemorySize"] == 1024
    assert props["Environment"]["Variables"]["EXECUTOR_FUNCTION_NAME"] == {"Ref": "ExecutorFunction"}
    assert {"LambdaInvokePolicy": {"FunctionName": {"Ref": "ExecutorFunction"}}} in props["Policies"]


def test_executor_async_invoke_config(template: dict[str, Any]) -> None:
    props = function_props(template, "ExecutorFunction")
    assert props["Timeout"] == 180  # request timeouts are capped at 120 s
    config = props["EventInvokeConfig"]
    assert config["MaximumRetryAttempts"] == 2
    assert 60 <= config["MaximumEventAgeInSeconds"] <= 21600
    on_failure = config["DestinationConfig"]["OnFailure"]
    assert on_failure["Type"] == "SQS"
    assert on_failure["Destination"] == {"Fn::GetAtt": ["ExecutorFailureQueue", "Arn"]}


def test_layer_is_built_for_python313_arm64(resources: dict[str, Any]) -> None:
    layer = resources["CommonLayer"]
    assert layer["Type"] == "AWS::Serverless::LayerVersion"
    assert layer["Metadata"] == {"BuildMethod": "python3.13", "BuildArchitecture": "arm64"}
    assert layer["Properties"]["ContentUri"] == "layers/common"
    assert "python3.13" in layer["Properties"]["CompatibleRuntimes"]
    assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]
    assert (ROOT / "layers/common/tickwork/__init__.py").is_file()


def _requirement_lines(text: str) -> list[str]:
    return [line.split("#", 1)[0].strip() for line in text.splitlines() if line.split("#", 1)[0].strip()]


def test_function_requirements_add_nothing_beyond_the_layer() -> None:
    for directory in FUNCTIONS.values():
        path = ROOT / "functions" / directory / "requirements.txt"
        if path.exists():
            assert _requirement_lines(path.read_text()) == [], path


# ------------------------------------------------------------------------------------- HTTP API


def test_every_api_event_is_a_route_of_the_http_api(resources: dict[str, Any]) -> None:
    """Which routes there are, and their authorizers and throttles: tests/unit/test_template_routes.py."""
    assert resources["HttpApi"]["Type"] == "AWS::Serverless::HttpApi"
    for name, event in resources["ApiFunction"]["Properties"]["Events"].items():
        props = event["Properties"]
        assert event["Type"] == "HttpApi" and props["ApiId"] == {"Ref": "HttpApi"}, name
        assert props.get("PayloadFormatVersion") == "2.0", name
        assert props.get("Path") and props.get("Method"), f"{name}: a $default route (no Path) reaches no authorizer"


def test_guided_deploy_finds_authentication_on_every_api_event(resources: dict[str, Any]) -> None:
    # sam deploy --guided asks "<function> has no authentication. Is this okay?" for each HttpApi event
    # that has no Auth of its own and whose API has no Auth (samcli/commands/deploy/auth_utils.py);
    # refusing aborts the deploy, so with every default accepted no event may prompt.
    api_has_auth = bool(resources["HttpApi"]["Properties"].get("Auth"))
    for name in serverless_functions(resources):
        for event_name, event in resources[name]["Properties"].get("Events", {}).items():
            if event["Type"] in ("Api", "HttpApi"):
                assert event["Properties"].get("Auth") or api_has_auth, (name, event_name)


def test_the_authorizer_is_the_api_function_with_a_short_cache(transformed: dict[str, Any]) -> None:
    resources = transformed["Resources"]
    body = resources["HttpApi"]["Properties"]["Body"]
    scheme = body["components"]["securitySchemes"]["ApiKeyAuthorizer"]["x-amazon-apigateway-authorizer"]
    assert scheme["type"] == "request" and scheme["enableSimpleResponses"] is True
    assert scheme["authorizerPayloadFormatVersion"] == "2.0"
    assert scheme["identitySource"] == ["$request.header.Authorization"]
    assert 0 < scheme["authorizerResultTtlInSeconds"] <= 60  # a short cache
    assert scheme["authorizerUri"]["Fn::Sub"][1]["__FunctionArn__"] == {"Fn::GetAtt": ["ApiFunction", "Arn"]}
    permission = resources["HttpApiApiKeyAuthorizerAuthorizerPermission"]["Properties"]
    assert permission["Principal"] == "apigateway.amazonaws.com"
    assert permission["SourceArn"]["Fn::Sub"][0].endswith("/authorizers/*")


# ----------------------------------------------------------------------------------- tick loop


def test_state_machine_loops_over_the_poller(resources: dict[str, Any], template: dict[str, Any]) -> None:
    props = resources["TickLoop"]["Properties"]
    assert resources["TickLoop"]["Type"] == "AWS::Serverless::StateMachine"
    assert props["Type"] == "EXPRESS"
    assert props["DefinitionSubstitutions"]["PollerFunctionArn"] == {"Fn::GetAtt": ["PollerFunction", "Arn"]}
    assert {"LambdaInvokePolicy": {"FunctionName": {"Ref": "PollerFunction"}}} in props["Policies"]

    definition = props["Definition"]
    states = definition["States"]
    tasks = [n for n, s in states.items() if s["Type"] == "Task"]
    assert len(tasks) == 1
    task = states[tasks[0]]
    assert task["Resource"] == "arn:aws:states:::lambda:invoke"
    assert task["Arguments"]["FunctionName"] == "${PollerFunctionArn}"
    assert task["TimeoutSeconds"] > function_props(template, "PollerFunction")["Timeout"]

    waits = [s for s in states.values() if s["Type"] == "Wait" and "next_tick_at" in str(s.get("Timestamp", ""))]
    assert waits, "no Wait state waits for the poller's next_tick_at"

    def successors(state: dict[str, Any]) -> list[str]:
        nxt = [state["Next"]] if "Next" in state else []
        nxt += [c["Next"] for c in state.get("Choices", [])] + [c["Next"] for c in state.get("Catch", [])]
        return nxt + ([state["Default"]] if "Default" in state else [])

    for name, state in states.items():
        for target in successors(state):
            assert target in states, f"{name} -> {target}: no such state"
    assert definition["StartAt"] == tasks[0]

    # From the task, the poller is reached again (a loop) and a terminal state is reachable (it ends).
    seen, frontier, loops = set(), [tasks[0]], False
    while frontier:
        for target in successors(states[frontier.pop()]):
            loops |= target == tasks[0]
            if target not in seen:
                seen.add(target)
                frontier.append(target)
    assert loops, "the state machine never calls the poller a second time"
    assert any(states[n]["Type"] in ("Succeed", "Fail") or states[n].get("End") for n in seen)


def schedules_of(resources: dict[str, Any], target: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in resources.values()
            if r["Type"] == "AWS::Scheduler::Schedule" and r["Properties"]["Target"]["Arn"] == target]


def test_tick_loops_restart_every_minute_and_overlap(resources: dict[str, Any], template: dict[str, Any]) -> None:
    props = resources["TickLoop"]["Properties"]
    assert "Events" not in props, "the schedule is its own resource, so it can wait for the migration"
    (schedule,) = schedules_of(resources, {"Ref": "TickLoop"})
    assert schedule["Properties"]["ScheduleExpression"] == "rate(1 minute)"
    assert schedule["Properties"]["State"] == {"Ref": "TickLoopState"}
    assert schedule["Properties"]["Target"]["RetryPolicy"]["MaximumEventAgeInSeconds"] == 60
    loop = template["Parameters"]["TickLoopSeconds"]
    # Each loop must outlive the 60 s restart period (overlap) and end before Express kills it.
    assert 60 < loop["MinValue"] <= loop["Default"] <= loop["MaxValue"] < EXPRESS_MAX_SECONDS
    assert props["DefinitionSubstitutions"]["TickLoopSeconds"] == {"Ref": "TickLoopSeconds"}
    assert "${TickLoopSeconds}" in json.dumps(props["Definition"])


def test_maintenance_runs_every_minute_on_the_poller(resources: dict[str, Any], template: dict[str, Any]) -> None:
    assert "Events" not in resources["PollerFunction"]["Properties"]
    (schedule,) = schedules_of(resources, {"Fn::GetAtt": ["PollerFunction", "Arn"]})
    props = schedule["Properties"]
    assert props["ScheduleExpression"] == "rate(1 minute)"
    # The handler routes on the same event the handler tests use.
    assert json.loads(props["Target"]["Input"]) == json.loads((ROOT / "events/poller_maintenance.json").read_text())
    assert props["Target"]["RetryPolicy"]["MaximumRetryAttempts"] == 0
    # A pass that is late or failed is superseded by the next one: nobody should queue or retry it.
    config = function_props(template, "PollerFunction")["EventInvokeConfig"]
    assert config["MaximumRetryAttempts"] == 0 and config["MaximumEventAgeInSeconds"] <= 60
    # The tick gets its own concurrency by default: a burst of executors cannot throttle it.
    assert template["Parameters"]["PollerReservedConcurrency"]["Default"] == 3


# ------------------------------------------------------------------------------ logs, outputs


def test_log_groups_have_retention_and_functions_use_them(resources: dict[str, Any]) -> None:
    groups = {n for n, r in resources.items() if r["Type"] == "AWS::Logs::LogGroup"}
    for name in groups:
        assert resources[name]["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}, name
    for name in serverless_functions(resources):
        assert resources[name]["Properties"]["LoggingConfig"]["LogGroup"]["Ref"] in groups, name
    destination = resources["TickLoop"]["Properties"]["Logging"]["Destinations"][0]
    assert destination["CloudWatchLogsLogGroup"]["LogGroupArn"]["Fn::GetAtt"][0] in groups


def test_outputs(template: dict[str, Any]) -> None:
    outputs = template["Outputs"]
    for key in ("ApiUrl", "StateMachineArn", "ApiFunctionName", "PollerFunctionName", "ExecutorFunctionName"):
        assert key in outputs, key
    assert outputs["StateMachineArn"]["Value"] == {"Ref": "TickLoop"}


def test_the_create_tenant_command_invokes_the_api_function_with_the_admin_event(template: dict[str, Any]) -> None:
    from tickwork.api.admin import is_admin_event

    command = template["Outputs"]["CreateTenantCommand"]["Value"]["Fn::Sub"]
    assert command.startswith("aws lambda invoke --region ${AWS::Region} --function-name ${ApiFunction} ")
    assert "--cli-binary-format raw-in-base64-out" in command  # AWS CLI v2 otherwise expects base64
    payload = json.loads(re.search(r"--payload '([^']*)'", command).group(1))  # type: ignore[union-attr]
    assert payload == json.loads((ROOT / "events/api_admin_create_tenant.json").read_text())
    assert is_admin_event(payload)


def _overrides(section: dict[str, Any]) -> dict[str, str]:
    return dict(item.split("=", 1) for item in section["deploy"]["parameters"].get("parameter_overrides", []))


@pytest.fixture(scope="module")
def samconfig() -> dict[str, Any]:
    return tomllib.loads((ROOT / "samconfig.toml").read_text())


def test_samconfig_defaults(samconfig: dict[str, Any]) -> None:
    assert samconfig["default"]["global"]["parameters"]["stack_name"] == "tickwork"
    deploy = samconfig["default"]["deploy"]["parameters"]
    assert deploy["capabilities"] == "CAPABILITY_IAM"
    assert deploy["resolve_s3"] is True
    assert deploy["region"]
    # `sam deploy` without --config-env is the dev environment, spelled out so the two cannot drift.
    assert samconfig["dev"] == samconfig["default"]


@pytest.mark.parametrize("environment", ["default", "dev", "prod"])
def test_samconfig_overrides_are_valid_template_parameters(template: dict[str, Any], samconfig: dict[str, Any],
                                                           environment: str) -> None:
    params = template["Parameters"]
    overrides = _overrides(samconfig[environment])
    for name, value in overrides.items():
        spec = params[name]
        if "AllowedValues" in spec:
            assert value in [str(v) for v in spec["AllowedValues"]], (name, value)
        if spec["Type"] == "Number":
            assert spec.get("MinValue", float("-inf")) <= int(value) <= spec.get("MaxValue", float("inf")), name
    assert not {"DatabaseHost", "DatabaseSecretArn", "RedisUrl"} & set(overrides), "endpoints are per account"


def test_samconfig_prod_is_protected_and_both_reserve_the_tick(samconfig: dict[str, Any]) -> None:
    dev, prod = _overrides(samconfig["dev"]), _overrides(samconfig["prod"])
    assert dev["Stage"] == "dev" and dev["PollerReservedConcurrency"] == "3"
    assert prod["Stage"] == "prod" and prod["NatGateways"] == "PerAz"
    assert int(prod["PollerReservedConcurrency"]) >= 3  # two overlapping loops plus the maintenance pass
    assert samconfig["prod"]["global"]["parameters"]["stack_name"] != samconfig["dev"]["global"]["parameters"]["stack_name"]
    assert samconfig["prod"]["deploy"]["parameters"]["confirm_changeset"] is True


# ------------------------------------------------------------------------ network and data stores


def _conditional(resources: dict[str, Any], condition: str) -> set[str]:
    return {name for name, res in resources.items() if res.get("Condition") == condition}


def test_a_new_vpc_spans_two_azs_with_private_and_public_subnets(resources: dict[str, Any]) -> None:
    subnets = {n: r["Properties"] for n, r in resources.items() if r["Type"] == "AWS::EC2::Subnet"}
    assert set(subnets) == {"PublicSubnetA", "PublicSubnetB", "PrivateSubnetA", "PrivateSubnetB"}
    assert {n for n in subnets if resources[n]["Condition"] == "CreateNetwork"} == set(subnets)
    for side, index in (("A", 0), ("B", 1)):
        for kind in ("Public", "Private"):
            assert subnets[f"{kind}Subnet{side}"]["AvailabilityZone"] == {"Fn::Select": [index, {"Fn::GetAZs": ""}]}
    blocks = [json.dumps(p["CidrBlock"]) for p in subnets.values()]
    assert len(set(blocks)) == 4
    # Private subnets leave through a NAT gateway (the executor's outbound HTTPS), public ones through the IGW.
    routes = {n: r["Properties"] for n, r in resources.items() if r["Type"] == "AWS::EC2::Route"}
    assert routes["PublicRoute"]["GatewayId"] == {"Ref": "InternetGateway"}
    no_value = {"Ref": "AWS::NoValue"}
    assert routes["PrivateRouteA"]["NatGatewayId"] == {"Fn::If": ["NatInstance", no_value, {"Ref": "NatGatewayA"}]}
    assert routes["PrivateRouteB"]["NatGatewayId"] == {"Fn::If": ["NatInstance", no_value, {
        "Fn::If": ["NatPerAz", {"Ref": "NatGatewayB"}, {"Ref": "NatGatewayA"}]}]}
    for side in ("A", "B"):  # or, with NatGateways=Instance, through the NAT instance
        assert routes[f"PrivateRoute{side}"]["InstanceId"] == {"Fn::If": ["NatInstance", {"Ref": "NatInstance"}, no_value]}
    for private in ("A", "B"):
        association = resources[f"PrivateSubnet{private}RouteTable"]["Properties"]
        assert association == {"SubnetId": {"Ref": f"PrivateSubnet{private}"}, "RouteTableId": {"Ref": f"PrivateRouteTable{private}"}}
    assert resources["NatGatewayA"]["Properties"]["SubnetId"] == {"Ref": "PublicSubnetA"}
    assert resources["NatGatewayB"]["Properties"]["SubnetId"] == {"Ref": "PublicSubnetB"}


def test_one_nat_gateway_by_default_one_per_az_as_an_option(template: dict[str, Any]) -> None:
    resources = template["Resources"]
    nat = {n for n, r in resources.items() if r["Type"] == "AWS::EC2::NatGateway"}
    assert _conditional(resources, "NatPerAz") >= {"NatGatewayB", "NatAddressB"}
    assert resources["NatGatewayA"]["Condition"] == "NatGatewayInA" and nat == {"NatGatewayA", "NatGatewayB"}
    # The cheaper option: one NAT instance and no gateway, recovered by EC2 when its host fails.
    assert _conditional(resources, "NatInstance") == {"NatInstance", "NatInstanceAddress", "NatInstanceSecurityGroup",
                                                      "NatInstanceRecovery"}
    instance = resources["NatInstance"]["Properties"]
    assert instance["SourceDestCheck"] is False and instance["SubnetId"] == {"Ref": "PublicSubnetA"}
    assert "ec2:recover" in json.dumps(resources["NatInstanceRecovery"]["Properties"]["AlarmActions"])
    assert template["Parameters"]["NatGateways"]["Default"] == "Single"
    assert template["Conditions"]["NatPerAz"] == {
        "Fn::And": [{"Condition": "CreateNetwork"}, {"Fn::Equals": [{"Ref": "NatGateways"}, "PerAz"]}]}


def _rules(resources: dict[str, Any], kind: str, group: str) -> list[dict[str, Any]]:
    inline = resources[group]["Properties"].get("SecurityGroupEgress" if kind == "Egress" else "SecurityGroupIngress", [])
    separate = [r["Properties"] for r in resources.values()
                if r["Type"] == f"AWS::EC2::SecurityGroup{kind}" and r["Properties"]["GroupId"] == {"Ref": group}]
    return list(inline) + separate


FUNCTIONS_SG = {"Fn::If": ["CreateNetwork", {"Ref": "FunctionSecurityGroup"}, {"Fn::Select": [0, {"Ref": "SecurityGroupIds"}]}]}


@pytest.mark.parametrize("group,port", [("DatabaseSecurityGroup", 5432), ("CacheSecurityGroup", 6379)])
def test_data_stores_accept_only_their_port_from_the_functions(resources: dict[str, Any], group: str, port: int) -> None:
    # With RdsProxy=Enabled the database also accepts the proxy (tests/unit/test_template_operations.py).
    (ingress,) = [r for r in _rules(resources, "Ingress", group)
                  if r["SourceSecurityGroupId"] != {"Ref": "DatabaseProxySecurityGroup"}]
    assert (ingress["IpProtocol"], ingress["FromPort"], ingress["ToPort"]) == ("tcp", port, port)
    assert ingress["SourceSecurityGroupId"] == FUNCTIONS_SG and "CidrIp" not in ingress
    # The default allow-all egress is replaced by a rule that matches nothing.
    (egress,) = _rules(resources, "Egress", group)
    assert egress["CidrIp"] == "127.0.0.1/32" and egress["IpProtocol"] == "icmp"


def test_functions_reach_web_ports_postgres_and_the_cache_and_nothing_else(resources: dict[str, Any]) -> None:
    assert _rules(resources, "Ingress", "FunctionSecurityGroup") == []
    egress = _rules(resources, "Egress", "FunctionSecurityGroup")
    # 443 (the AWS APIs) always; the other target ports one conditional rule each, slot N of TargetPorts
    # (evaluated in tests/unit/test_template_operations.py).
    to_internet = [r["FromPort"] for r in egress if r.get("CidrIp") == "0.0.0.0/0"]
    assert to_internet[0] == 443 and len(to_internet) == 6
    slots = {f"FunctionToTargetPort{i}": f"TargetPort{i}" for i in range(1, 6)}
    assert {name: resources[name]["Condition"] for name in slots} == slots
    to_groups = {(r["FromPort"], r["DestinationSecurityGroupId"]["Ref"]) for r in egress if "DestinationSecurityGroupId" in r}
    assert to_groups == {(5432, "DatabaseSecurityGroup"), (6379, "CacheSecurityGroup"),
                         (5432, "DatabaseProxySecurityGroup")}
    assert all(r["IpProtocol"] == "tcp" and r["FromPort"] == r["ToPort"] for r in egress)
    assert len(egress) == 9


def test_database_is_private_encrypted_backed_up_and_snapshotted(resources: dict[str, Any]) -> None:
    database = resources["Database"]
    props = database["Properties"]
    assert database["Type"] == "AWS::RDS::DBInstance" and database["Condition"] == "CreateDatabase"
    assert props["Engine"] == "postgres"
    assert props["EngineVersion"] == {"Ref": "DatabaseEngineVersion"}
    assert props["ManageMasterUserPassword"] is True and "MasterUserPassword" not in props
    assert props["StorageEncrypted"] is True and props["PubliclyAccessible"] is False
    assert props["BackupRetentionPeriod"] == {"Ref": "DatabaseBackupRetentionDays"}
    assert props["DeletionProtection"] == {"Fn::If": ["IsProduction", True, False]}
    assert database["DeletionPolicy"] == "Snapshot" and database["UpdateReplacePolicy"] == "Snapshot"
    assert props["VPCSecurityGroups"] == [{"Ref": "DatabaseSecurityGroup"}]
    assert resources["DatabaseSubnetGroup"]["Properties"]["SubnetIds"] == {
        "Fn::If": ["CreateNetwork", PRIVATE_SUBNETS, {"Ref": "SubnetIds"}]}


def test_database_parameters_allow_postgres_16_or_later(template: dict[str, Any]) -> None:
    version = template["Parameters"]["DatabaseEngineVersion"]
    assert all(int(v) >= 16 for v in version["AllowedValues"]) and version["Default"] in version["AllowedValues"]
    assert template["Parameters"]["DatabaseBackupRetentionDays"]["MinValue"] >= 1
    assert template["Conditions"]["IsProduction"] == {"Fn::Equals": [{"Ref": "Stage"}, "prod"]}


def test_cache_is_serverless_valkey_in_the_private_subnets(template: dict[str, Any], resources: dict[str, Any]) -> None:
    cache = resources["Cache"]
    assert cache["Type"] == "AWS::ElastiCache::ServerlessCache" and cache["Condition"] == "CreateServerlessCache"
    props = cache["Properties"]
    assert props["Engine"] == "valkey"
    assert props["SubnetIds"] == {"Fn::If": ["CreateNetwork", PRIVATE_SUBNETS, {"Ref": "SubnetIds"}]}
    assert props["SecurityGroupIds"] == [{"Ref": "CacheSecurityGroup"}]
    assert template["Parameters"]["CacheType"]["Default"] == "Serverless"
    assert template["Conditions"]["CreateServerlessCache"] == {
        "Fn::And": [{"Condition": "CreateCache"}, {"Fn::Equals": [{"Ref": "CacheType"}, "Serverless"]}]}


def test_node_based_cache_option_is_valkey_with_tls_and_cluster_mode(template: dict[str, Any],
                                                                      resources: dict[str, Any]) -> None:
    cache = resources["NodeCache"]
    assert cache["Type"] == "AWS::ElastiCache::ReplicationGroup" and cache["Condition"] == "CreateNodeCache"
    props = cache["Properties"]
    assert props["Engine"] == "valkey" and props["ClusterMode"] == "Enabled"
    assert props["TransitEncryptionEnabled"] is True and props["TransitEncryptionMode"] == "required"
    assert props["AtRestEncryptionEnabled"] is True
    assert props["AutomaticFailoverEnabled"] is True and props["MultiAZEnabled"] is True
    assert template["Parameters"]["CacheReplicas"]["MinValue"] >= 1  # Multi-AZ needs a replica
    assert props["SecurityGroupIds"] == [{"Ref": "CacheSecurityGroup"}]
    assert props["CacheSubnetGroupName"] == {"Ref": "CacheSubnetGroup"}
    assert resources["CacheSubnetGroup"]["Properties"]["SubnetIds"] == {
        "Fn::If": ["CreateNetwork", PRIVATE_SUBNETS, {"Ref": "SubnetIds"}]}
    assert template["Conditions"]["CreateNodeCache"] == {
        "Fn::And": [{"Condition": "CreateCache"}, {"Fn::Equals": [{"Ref": "CacheType"}, "Nodes"]}]}


# ------------------------------------------------------------------------------------------- IAM


def _statements(transformed: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for name, res in transformed["Resources"].items():
        props = res.get("Properties", {})
        # A policy only some parameters want is an Fn::If of a policy and AWS::NoValue: check both sides.
        policies = [branch for p in props.get("Policies", []) for branch in (p["Fn::If"][1:] if "Fn::If" in p else [p])]
        documents = [p["PolicyDocument"] for p in policies if p != {"Ref": "AWS::NoValue"}]
        if res["Type"] in ("AWS::IAM::ManagedPolicy", "AWS::IAM::Policy"):
            documents.append(props["PolicyDocument"])
        for document in documents:
            found.extend((name, statement) for statement in document["Statement"])
    return found


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_no_iam_action_is_a_wildcard(transformed: dict[str, Any]) -> None:
    statements = _statements(transformed)
    assert len(statements) >= 5
    for name, statement in statements:
        for action in _as_list(statement["Action"]):
            assert "*" not in action, (name, statement)


def test_only_account_level_apis_get_resource_star(transformed: dict[str, Any]) -> None:
    # Step Functions' log delivery APIs and X-Ray's write APIs (Tracing=Active) take no resource ARN:
    # AWS requires "*" for them.
    account_level = {"logs:CreateLogDelivery", "logs:GetLogDelivery", "logs:UpdateLogDelivery",
                     "logs:DeleteLogDelivery", "logs:ListLogDeliveries", "logs:PutResourcePolicy",
                     "logs:DescribeResourcePolicies", "logs:DescribeLogGroups",
                     "xray:PutTraceSegments", "xray:PutTelemetryRecords", "xray:GetSamplingRules",
                     "xray:GetSamplingTargets"}
    for name, statement in _statements(transformed):
        if statement.get("Resource") == "*":
            assert set(_as_list(statement["Action"])) <= account_level, (name, statement)


def test_every_function_may_read_only_the_database_secret(transformed: dict[str, Any]) -> None:
    resources = transformed["Resources"]
    (statement,) = resources["DatabaseSecretReadPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Action"] == "secretsmanager:GetSecretValue"
    assert statement["Resource"] == {"Fn::If": [
        "CreateDatabase", {"Fn::GetAtt": ["Database", "MasterUserSecret.SecretArn"]}, {"Fn::Sub": "${DatabaseSecretArn}"}]}
    attached = {"Ref": "DatabaseSecretReadPolicy"}
    for function in FUNCTIONS:
        role = resources[function]["Properties"]["Role"]["Fn::GetAtt"][0]
        assert attached in resources[role]["Properties"]["ManagedPolicyArns"], function


def test_the_secrets_key_rotates_and_only_the_api_executor_and_jobs_resource_may_make_data_keys(transformed: dict[str, Any]) -> None:
    resources = transformed["Resources"]
    key = resources["SecretsKey"]["Properties"]
    assert key["EnableKeyRotation"] is True
    account_wide = [s for s in key["KeyPolicy"]["Statement"] if "Condition" not in s]
    assert all(not {"kms:Decrypt", "kms:GenerateDataKey", "kms:*"} & set(s["Action"]) for s in account_wide)
    (use,) = resources["SecretsKeyUsePolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert set(use["Action"]) == {"kms:GenerateDataKey", "kms:Decrypt"}
    assert use["Resource"] == {"Fn::GetAtt": ["SecretsKey", "Arn"]}
    (unwrap,) = resources["SecretsKeyDecryptPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert (unwrap["Action"], unwrap["Resource"]) == ("kms:Decrypt", use["Resource"])
    for function in FUNCTIONS:
        role = resources[function]["Properties"]["Role"]["Fn::GetAtt"][0]
        policies = resources[role]["Properties"]["ManagedPolicyArns"]
        assert ({"Ref": "SecretsKeyUsePolicy"} in policies) == (function != "PollerFunction")
        # The maintenance pass finishes re-encryption after a rotation (tickwork.secrets.vault.reseal_unsettled).
        assert ({"Ref": "SecretsKeyDecryptPolicy"} in policies) == (function == "PollerFunction")
        env = resources[function]["Properties"]["Environment"]["Variables"]
        assert env["TICKWORK_KMS_KEY_ID"] == {"Ref": "SecretsKey"}


# ------------------------------------------------------------------------------- deploy ordering


def test_the_schema_is_migrated_by_its_own_function_on_every_code_or_database_change(
    resources: dict[str, Any],
) -> None:
    from tickwork.ops.custom_resource import RESPONSE_MARGIN_SECONDS
    from tickwork.ops.provisioning import MIGRATION_RESOURCE_TYPE

    migration = resources["SchemaMigration"]
    assert migration["Type"] == MIGRATION_RESOURCE_TYPE  # the only type the function accepts
    props = migration["Properties"]
    assert props["ServiceToken"] == {"Fn::GetAtt": ["MigrationsFunction", "Arn"]}
    # Minutes to migrate, an answer before the function's timeout, CloudFormation waiting a little longer.
    timeout = resources["MigrationsFunction"]["Properties"]["Timeout"]
    assert 120 <= timeout - RESPONSE_MARGIN_SECONDS and timeout < props["ServiceTimeout"] <= timeout + 120
    # A new layer version is new code, possibly new migrations: the resource is updated, migrate runs.
    assert props["CodeVersion"] == {"Ref": "CommonLayer"}
    # ...and the function knows its own, so a stack rolling back (an older one asked for) migrates nothing.
    env = resources["MigrationsFunction"]["Properties"]["Environment"]["Variables"]
    assert env["TICKWORK_CODE_VERSION"] == {"Ref": "CommonLayer"}
    # So is a new, empty database: a replaced instance has a new address, a new DatabaseName a new name.
    assert props["DatabaseEndpoint"] == {"Fn::If": ["CreateDatabase", {"Fn::GetAtt": ["Database", "Endpoint.Address"]},
                                                    {"Ref": "DatabaseHost"}]}
    assert props["DatabaseName"] == {"Ref": "DatabaseName"}
    # The function reads its secret through the NAT, connects through the security groups and answers
    # through the S3 endpoint: every route, association and rule on that path exists before it is called,
    # and on delete goes only after it answered (the internet gateway's route and attachment included).
    waits = {item["Fn::If"][1]["Ref"]: item["Fn::If"][0] for item in props["NetworkReady"]}
    assert all(item["Fn::If"][2] == {"Ref": "AWS::NoValue"} for item in props["NetworkReady"])
    on_the_path = {name: res.get("Condition") for name, res in resources.items() if res["Type"] in (
        "AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress", "AWS::EC2::SubnetRouteTableAssociation",
        "AWS::EC2::Route", "AWS::RDS::DBProxyTargetGroup", "AWS::EC2::VPCGatewayAttachment", "AWS::EC2::VPCEndpoint")
        and "PublicSubnet" not in name}
    assert waits == on_the_path


def _dependencies(resources: dict[str, Any], name: str) -> set[str]:
    """Every resource CloudFormation creates or updates before `name`: its DependsOn and what it references
    (Ref, Fn::GetAtt, ${...} in Fn::Sub), and theirs."""
    found: set[str] = set()
    todo = [name]
    while todo:
        resource = resources[todo.pop()]
        text = json.dumps(resource.get("Properties", {}))
        direct = set(_as_list(resource.get("DependsOn", [])))
        direct |= set(re.findall(r'"Ref": "([A-Za-z0-9]+)"', text))
        direct |= set(re.findall(r'"Fn::GetAtt": \["([A-Za-z0-9]+)"', text))
        direct |= set(re.findall(r"\$\{([A-Za-z0-9]+)[.}]", text))
        for other in (direct & set(resources)) - found:
            found.add(other)
            todo.append(other)
    return found


def test_new_code_runs_only_once_its_schema_is_in_place(transformed: dict[str, Any]) -> None:
    """On an update CloudFormation changes a resource only after those it depends on: the functions that read
    and write the schema wait for SchemaMigration, so no new code meets the old schema (the old code meets
    the new one meanwhile, which every migration allows: docs/deploy.md, "Releases and upgrades")."""
    resources = transformed["Resources"]
    functions = {name for name, r in resources.items() if r["Type"] == "AWS::Lambda::Function"}
    assert functions == {"ApiFunction", "PollerFunction", "ExecutorFunction", "JobsResourceFunction",
                         "MigrationsFunction"}
    for name in functions - {"MigrationsFunction"}:
        assert "SchemaMigration" in _dependencies(resources, name), name
    # ...and the tick loop, which calls the poller, changes after it.
    assert {"SchemaMigration", "PollerFunction"} <= _dependencies(resources, "TickLoop")
    # No cycle: the migration waits for none of them.
    assert not _dependencies(resources, "SchemaMigration") & (functions - {"MigrationsFunction"})


def test_a_major_version_offered_for_the_database_can_be_deployed(template: dict[str, Any]) -> None:
    """DatabaseEngineVersion offers more than one major version: changing it must upgrade in place."""
    resources = template["Resources"]
    majors = {version.split(".")[0] for version in template["Parameters"]["DatabaseEngineVersion"]["AllowedValues"]}
    assert len(majors) > 1 and resources["Database"]["Properties"]["AllowMajorVersionUpgrade"] is True


def test_nothing_is_scheduled_before_the_migration(transformed: dict[str, Any]) -> None:
    resources = transformed["Resources"]
    schedules = {n: r for n, r in resources.items() if r["Type"] in ("AWS::Scheduler::Schedule", "AWS::Events::Rule")}
    assert set(schedules) == {"TickLoopSchedule", "MaintenanceSchedule"}
    for name, schedule in schedules.items():
        assert _as_list(schedule.get("DependsOn", [])) == ["SchemaMigration"], name
    # The scheduler's role may start the loop and invoke the poller, nothing more.
    role = resources["SchedulerRole"]["Properties"]
    statements = role["Policies"][0]["PolicyDocument"]["Statement"]
    assert {(s["Action"], json.dumps(s["Resource"])) for s in statements} == {
        ("states:StartExecution", json.dumps({"Ref": "TickLoop"})),
        ("lambda:InvokeFunction", json.dumps({"Fn::GetAtt": ["PollerFunction", "Arn"]})),
    }
    for name in schedules:
        assert resources[name]["Properties"]["Target"]["RoleArn"] == {"Fn::GetAtt": ["SchedulerRole", "Arn"]}


def test_an_existing_network_must_be_described_completely(template: dict[str, Any]) -> None:
    rules = template["Rules"]
    uses_subnets = {"Fn::Not": [{"Fn::Contains": [{"Ref": "SubnetIds"}, ""]}]}
    groups = rules["ExistingSubnetsNeedSecurityGroups"]
    assert groups["RuleCondition"] == uses_subnets
    assert groups["Assertions"][0]["Assert"] == {"Fn::Not": [{"Fn::Contains": [{"Ref": "SecurityGroupIds"}, ""]}]}
    vpc = rules["ExistingSubnetsNeedTheirVpcForNewDataStores"]
    assert vpc["RuleCondition"]["Fn::And"] == [uses_subnets, {"Fn::Or": [
        {"Fn::Equals": [{"Ref": "DatabaseHost"}, ""]}, {"Fn::Equals": [{"Ref": "RedisUrl"}, ""]}]}]
    assert vpc["Assertions"][0]["Assert"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "VpcId"}, ""]}]}
    secret = rules["ExistingDatabaseNeedsItsSecret"]
    assert secret["RuleCondition"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "DatabaseHost"}, ""]}]}
    assert secret["Assertions"][0]["Assert"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "DatabaseSecretArn"}, ""]}]}
