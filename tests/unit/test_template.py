"""Static checks of the SAM template: cfn-lint finds no error, and the shape the runtime relies on holds.

No AWS access: cfn-lint runs locally and the rest reads template.yaml with cfn-lint's own decoder,
which understands the short intrinsic tags (!Ref, !GetAtt, !If, ...).
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from cfnlint.api import lint
from cfnlint.decode import decode

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
FUNCTIONS = {"ApiFunction": "api", "PollerFunction": "poller", "ExecutorFunction": "executor"}
EXPRESS_MAX_SECONDS = 300

# (method, path) the API must answer; a route covers one if its method is ANY or equal and its path is
# equal or a greedy {proxy+} prefix of it.
REQUIRED_ROUTES = {
    ("GET", "/jobs"), ("POST", "/jobs"),
    ("GET", "/jobs/{id}"), ("PATCH", "/jobs/{id}"), ("PUT", "/jobs/{id}"), ("DELETE", "/jobs/{id}"),
    ("POST", "/jobs/{id}/pause"),
    ("POST", "/jobs/{id}/resume"),
    ("POST", "/jobs/{id}/run"),
    ("GET", "/jobs/{id}/executions"),
    ("GET", "/executions/{id}"),
    ("POST", "/schedules/preview"),
}


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    tpl, matches = decode(str(TEMPLATE))
    assert not matches, [str(m) for m in matches]
    assert tpl is not None
    return tpl


@pytest.fixture(scope="module")
def resources(template: dict[str, Any]) -> dict[str, Any]:
    return template["Resources"]


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


def test_cfn_lint_reports_no_errors() -> None:
    proc = subprocess.run(
        [*cfn_lint_command(), "--format", "json", str(TEMPLATE)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert proc.stdout.strip(), f"cfn-lint printed nothing (rc={proc.returncode}): {proc.stderr}"
    findings = json.loads(proc.stdout)
    errors = [f for f in findings if f["Level"] == "Error"]
    assert not errors, json.dumps(errors, indent=1)
    # Exit code 2 is cfn-lint's "errors found" bit.
    assert proc.returncode & 2 == 0, proc.stdout + proc.stderr


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


def test_the_three_functions_exist(resources: dict[str, Any]) -> None:
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


def test_every_function_gets_the_shared_environment_and_vpc(template: dict[str, Any]) -> None:
    for name in serverless_functions(template["Resources"]):
        props = function_props(template, name)
        env = props["Environment"]["Variables"]
        assert env["DATABASE_URL"] == {"Ref": "DatabaseUrl"}, name
        assert env["REDIS_URL"] == {"Ref": "RedisUrl"}, name
        assert env["TICKWORK_NAMESPACE"] == "tickwork", name
        assert env["LOG_LEVEL"] == {"Ref": "LogLevel"}, name
        assert env["POWERTOOLS_SERVICE_NAME"], name
        vpc = props["VpcConfig"]["Fn::If"]
        assert vpc[0] == "HasVpc" and vpc[2] == {"Ref": "AWS::NoValue"}, name
        assert vpc[1] == {"SubnetIds": {"Ref": "SubnetIds"}, "SecurityGroupIds": {"Ref": "SecurityGroupIds"}}, name


def test_database_url_is_a_hidden_parameter(template: dict[str, Any]) -> None:
    params = template["Parameters"]
    assert params["DatabaseUrl"]["NoEcho"] is True
    assert "Default" not in params["DatabaseUrl"] and "Default" not in params["RedisUrl"]
    # The template must also deploy without a VPC.
    assert params["SubnetIds"]["Default"] == "" and params["SecurityGroupIds"]["Default"] == ""
    redis_pattern = re.compile(params["RedisUrl"]["AllowedPattern"])
    assert redis_pattern.fullmatch("rediss+cluster://tickwork-x.serverless.use1.cache.amazonaws.com:6379")
    assert not redis_pattern.fullmatch("https://example.com")


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


def test_layer_requirements_mirror_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    layer = _requirement_lines((ROOT / "layers/common/requirements.txt").read_text())
    assert sorted(layer) == sorted(project["dependencies"])


def test_function_requirements_add_nothing_beyond_the_layer() -> None:
    for directory in FUNCTIONS.values():
        path = ROOT / "functions" / directory / "requirements.txt"
        if path.exists():
            assert _requirement_lines(path.read_text()) == [], path


# ------------------------------------------------------------------------------------- HTTP API


def _covers(route: tuple[str, str], wanted: tuple[str, str]) -> bool:
    method, path = route
    if method not in ("ANY", wanted[0]):
        return False
    if path.endswith("/{proxy+}"):
        prefix = path[: -len("{proxy+}")]
        return wanted[1].startswith(prefix) and len(wanted[1]) > len(prefix)
    return path == wanted[1]


def test_http_api_routes_cover_the_api(resources: dict[str, Any]) -> None:
    api = resources["HttpApi"]
    assert api["Type"] == "AWS::Serverless::HttpApi"
    assert "Auth" not in api.get("Properties", {}), "auth is done in ApiFunction, not by an authorizer"
    routes = []
    defaults = 0
    for event in resources["ApiFunction"]["Properties"]["Events"].values():
        assert event["Type"] == "HttpApi"
        props = event["Properties"]
        assert props["ApiId"] == {"Ref": "HttpApi"}
        assert props.get("PayloadFormatVersion", "2.0") == "2.0"
        if "Path" not in props and "Method" not in props:
            defaults += 1  # SAM's $default route
            continue
        routes.append((props["Method"].upper(), props["Path"]))
    missing = [w for w in sorted(REQUIRED_ROUTES) if not any(_covers(r, w) for r in routes)]
    assert not missing, f"routes {routes} do not cover {missing}"
    # /openapi.json and unknown paths reach the function, so they get the API's error shape.
    assert defaults == 1


def test_route_coverage_rule_is_strict() -> None:
    assert _covers(("ANY", "/{proxy+}"), ("POST", "/jobs/{id}/run"))
    assert not _covers(("GET", "/jobs/{id}"), ("POST", "/jobs/{id}"))
    assert not _covers(("ANY", "/jobs"), ("GET", "/jobs/{id}"))


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


def test_tick_loops_restart_every_minute_and_overlap(resources: dict[str, Any], template: dict[str, Any]) -> None:
    props = resources["TickLoop"]["Properties"]
    schedules = [e for e in props["Events"].values() if e["Type"] in ("Schedule", "ScheduleV2")]
    assert len(schedules) == 1
    assert schedules[0]["Properties"]["ScheduleExpression"] == "rate(1 minute)"
    loop = template["Parameters"]["TickLoopSeconds"]
    # Each loop must outlive the 60 s restart period (overlap) and end before Express kills it.
    assert 60 < loop["MinValue"] <= loop["Default"] <= loop["MaxValue"] < EXPRESS_MAX_SECONDS
    assert props["DefinitionSubstitutions"]["TickLoopSeconds"] == {"Ref": "TickLoopSeconds"}
    assert "${TickLoopSeconds}" in json.dumps(props["Definition"])


def test_maintenance_runs_every_minute_on_the_poller(resources: dict[str, Any], template: dict[str, Any]) -> None:
    events = resources["PollerFunction"]["Properties"]["Events"]
    schedules = [e for e in events.values() if e["Type"] in ("Schedule", "ScheduleV2")]
    assert len(schedules) == 1
    props = schedules[0]["Properties"]
    assert props["ScheduleExpression"] == "rate(1 minute)"
    # The handler routes on the same event the handler tests use.
    assert json.loads(props["Input"]) == json.loads((ROOT / "events/poller_maintenance.json").read_text())
    # A pass that is late or failed is superseded by the next one: nobody should queue or retry it.
    config = function_props(template, "PollerFunction")["EventInvokeConfig"]
    assert config["MaximumRetryAttempts"] == 0 and config["MaximumEventAgeInSeconds"] <= 60
    # Two overlapping tick loops plus the pass must fit in the poller's reserved concurrency.
    assert template["Parameters"]["PollerReservedConcurrency"]["Default"] >= 3


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


def test_samconfig_defaults() -> None:
    config = tomllib.loads((ROOT / "samconfig.toml").read_text())
    assert config["default"]["global"]["parameters"]["stack_name"] == "tickwork"
    deploy = config["default"]["deploy"]["parameters"]
    assert deploy["capabilities"] == "CAPABILITY_IAM"
    assert deploy["resolve_s3"] is True
    assert deploy["region"]
    overrides = " ".join(deploy.get("parameter_overrides", []))
    assert "DatabaseUrl" not in overrides, "secrets do not belong in samconfig.toml"
