"""Operations in the SAM template, on the template as aws-sam-translator transforms it (offline): the
dashboard charts only metrics the code emits, each alarm and its target, the connection budget and RDS
Proxy, TLS, API throttling, X-Ray and the custom domain, with their conditions evaluated both ways.

CloudFormation evaluates conditions and rules at deploy time; `Conditions` below evaluates them the same
way for a given set of parameter values (only the functions the template uses), so a test can say which
resources a deploy with those values would create.
"""
from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from typing import Any
from unittest import mock

import pytest
from cfnlint.decode import decode

from tests.unit.test_template import TEMPLATE, _NoManagedPolicies, _statements
from tickwork import metrics
from tickwork.rules.quarantine import MAX_BACKOFF_MS

TOPIC = {"Ref": "OperatorTopic"}
RUN_FAILURES = {"Ref": "RunFailuresTopic"}


@lru_cache(maxsize=None)
def _source() -> str:
    tpl, matches = decode(str(TEMPLATE))
    assert not matches and tpl is not None
    return json.dumps(tpl)


@lru_cache(maxsize=None)
def _transformed(params: tuple[tuple[str, str], ...] = ()) -> str:
    return transform_source(_source(), params)


def transform_source(source: str, params: tuple[tuple[str, str], ...] = ()) -> str:
    """A decoded template (JSON) as SAM transforms it, with code locations as `sam package` sets them."""
    from samtranslator.translator.transform import transform

    copy = json.loads(source)
    for name, res in copy["Resources"].items():
        for key in ("CodeUri", "ContentUri"):
            if key in res.get("Properties", {}):
                res["Properties"][key] = f"s3://artifacts/{name}.zip"
    with mock.patch.dict(os.environ, {"AWS_DEFAULT_REGION": "us-east-1"}):
        return json.dumps(transform(copy, dict(params), _NoManagedPolicies()))


def transformed(**params: str) -> dict[str, Any]:
    return json.loads(_transformed(tuple(sorted(params.items()))))


class Stack:
    """What CloudFormation would make of the transformed template with these parameter values."""

    def __init__(self, **params: str) -> None:
        self.template = transformed(**params)
        self.params = {name: str(p.get("Default", "")) for name, p in self.template["Parameters"].items()}
        self.params.update(params)
        self._conditions: dict[str, bool] = {}

    def value(self, node: Any) -> Any:
        if isinstance(node, dict) and len(node) == 1:
            (fn, arg), = node.items()
            if fn == "Ref" and arg in self.params:
                kind = self.template["Parameters"][arg]["Type"]
                raw = self.params[arg]
                return raw.split(",") if kind == "CommaDelimitedList" else raw
            if fn == "Fn::Equals":
                left, right = (self.value(a) for a in arg)
                return str(left) == str(right)
            if fn == "Fn::Not":
                return not self.value(arg[0])
            if fn == "Fn::And":
                return all(self.value(a) for a in arg)
            if fn == "Fn::Or":
                return any(self.value(a) for a in arg)
            if fn == "Condition":
                return self.condition(arg)
            if fn == "Fn::Join":
                return arg[0].join(self.value(arg[1]))
            if fn == "Fn::Contains":
                return self.value(arg[1]) in self.value(arg[0])
            if fn == "Fn::If":
                return self.value(arg[1] if self.condition(arg[0]) else arg[2])
            if fn == "Fn::Select":
                return self.value(arg[1])[int(arg[0])]
            if fn == "Fn::Split":
                return self.value(arg[1]).split(arg[0])
            if fn == "Fn::Sub" and isinstance(arg, str) and set(re.findall(r"\$\{(\w+)\}", arg)) <= set(self.params):
                return re.sub(r"\$\{(\w+)\}", lambda m: self.params[m.group(1)], arg)  # parameters only
        return node

    def condition(self, name: str) -> bool:
        if name not in self._conditions:
            self._conditions[name] = bool(self.value(self.template["Conditions"][name]))
        return self._conditions[name]

    def resources(self) -> dict[str, Any]:
        return {n: r for n, r in self.template["Resources"].items()
                if "Condition" not in r or self.condition(r["Condition"])}

    def failed_rules(self) -> list[str]:
        failed = []
        for name, rule in self.template.get("Rules", {}).items():
            if "RuleCondition" in rule and not self.value(rule["RuleCondition"]):
                continue
            failed += [name for a in rule["Assertions"] if not self.value(a["Assert"])]
        return failed


@pytest.fixture(scope="module")
def default() -> Stack:
    return Stack()


# ------------------------------------------------------------------------------------------ dashboard


def _dashboard_variants(stack: Stack) -> list[dict[str, Any]]:
    """The dashboard body, once per branch of its conditional widget, with ${...} references filled in."""
    body, variables = stack.template["Resources"]["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]

    def branches(node: Any) -> list[str]:
        if isinstance(node, str):
            return [node]
        if "Fn::If" in node:
            return branches(node["Fn::If"][1]) + branches(node["Fn::If"][2])
        return [node["Fn::Sub"]]

    fill = lambda text: re.sub(r"\$\{([A-Za-z0-9:.]+)\}", lambda m: f"<{m.group(1)}>", text)  # noqa: E731
    (name, widget), = variables.items()
    return [json.loads(fill(body.replace("${" + name + "}", fill(branch)))) for branch in branches(widget)]


def _metric_lines(board: dict[str, Any]) -> list[list[Any]]:
    return [line for w in board["widgets"] if w["type"] == "metric" for line in w["properties"]["metrics"]]


def test_the_dashboard_charts_only_metric_names_the_code_emits(default: Stack) -> None:
    variants = _dashboard_variants(default)
    assert len(variants) == 3  # RDS Proxy, a created database, an existing database
    for board in variants:
        lines = _metric_lines(board)
        ours = [line for line in lines if line[0] == metrics.NAMESPACE]
        assert ours, "no Tickwork metric charted"
        for line in ours:
            name, dimensions = line[1], [x for x in line[2:] if not isinstance(x, dict)]
            assert name in metrics.NAMES, name
            # EMF puts every figure under the one service dimension (tickwork.metrics.SERVICE).
            assert dimensions == ["service", metrics.SERVICE], line
        for line in lines:  # no "..." shorthand: every line names its namespace and metric in full
            assert isinstance(line[0], str) and "/" in line[0] or line[0] == metrics.NAMESPACE, line


def test_the_dashboard_shows_every_figure_the_issue_lists(default: Stack) -> None:
    board = _dashboard_variants(default)[1]  # the created database
    charted = {(line[0], line[1]) for line in _metric_lines(board)}
    stats = {(line[1], line[-1].get("stat")) for line in _metric_lines(board) if isinstance(line[-1], dict)}
    for name in ("Ticks", "Dispatched", "DueBacklog", "RunsSucceeded", "RunsFailed", "RunsRetrying", "MissedRuns"):
        assert ("Tickwork", name) in charted, name
    assert {("FireLag", "p50"), ("FireLag", "p99")} <= stats
    assert ("AWS/SQS", "ApproximateNumberOfMessagesVisible") in charted
    assert {("AWS/Lambda", "Errors"), ("AWS/Lambda", "Throttles"), ("AWS/RDS", "DatabaseConnections")} <= charted
    per_function = {line[3] for line in _metric_lines(board) if line[:2] == ["AWS/Lambda", "Errors"]}
    assert per_function == {"<ApiFunction>", "<PollerFunction>", "<ExecutorFunction>"}
    proxy = {(line[0], line[1], line[2]) for line in _metric_lines(_dashboard_variants(default)[0])}
    assert ("AWS/RDS", "ClientConnections", "ProxyName") in proxy


def test_the_database_widget_follows_the_database_and_proxy_conditions(default: Stack) -> None:
    widget = default.template["Resources"]["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"][1]
    chosen = Stack().value(widget["DatabaseConnectionsWidget"])
    assert "DBInstanceIdentifier" in chosen["Fn::Sub"] and "ProxyName" not in chosen["Fn::Sub"]
    assert "ProxyName" in Stack(RdsProxy="Enabled").value(widget["DatabaseConnectionsWidget"])["Fn::Sub"]
    existing = Stack(DatabaseHost="db.internal", DatabaseSecretArn="arn:aws:secretsmanager:us-east-1:123456789012:secret:x")
    assert '"type": "text"' in existing.value(widget["DatabaseConnectionsWidget"])


# ------------------------------------------------------------------------------------------ alarms

ALARMS = {
    # name: (namespace, metric, statistic, period, evaluation periods, comparison, threshold, missing data)
    "NoTicksAlarm": ("Tickwork", "Ticks", "Sum", 60, 2, "LessThanThreshold", 1, "breaching"),
    "FireLagAlarm": ("Tickwork", "FireLag", "p99", 60, 5, "GreaterThanThreshold", 2000, "notBreaching"),
    "FailureQueueAlarm": ("AWS/SQS", "ApproximateNumberOfMessagesVisible", "Maximum", 300, 1,
                          "GreaterThanThreshold", 0, "notBreaching"),
    "ApiFunctionErrorsAlarm": ("AWS/Lambda", "Errors", "Sum", 300, 1, "GreaterThanThreshold", 0, "notBreaching"),
    "PollerFunctionErrorsAlarm": ("AWS/Lambda", "Errors", "Sum", 300, 1, "GreaterThanThreshold", 0, "notBreaching"),
    "ExecutorFunctionErrorsAlarm": ("AWS/Lambda", "Errors", "Sum", 300, 1, "GreaterThanThreshold", 0, "notBreaching"),
    "ExecutorThrottlesAlarm": ("AWS/Lambda", "Throttles", "Sum", 300, 1, "GreaterThanThreshold", 0, "notBreaching"),
    "DatabaseFreeStorageAlarm": ("AWS/RDS", "FreeStorageSpace", "Minimum", 300, 1, "LessThanThreshold", 2 * 1024 ** 3,
                                 "notBreaching"),
    "QuarantinedEntriesAlarm": ("Tickwork", "QuarantinedEntries", "Sum", 300, 12, "GreaterThanThreshold", 0,
                                "notBreaching"),
}
# Alarms on as soon as one period breaches, and off only once none of their periods did (the others need every one).
DATAPOINTS = {"QuarantinedEntriesAlarm": 1}


def test_every_alarm_exists_with_its_threshold_and_notifies_the_operator_topic(default: Stack) -> None:
    resources = default.resources()
    alarms = {n: r["Properties"] for n, r in resources.items() if r["Type"] == "AWS::CloudWatch::Alarm"}
    assert set(alarms) == set(ALARMS)
    for name, (namespace, metric, stat, period, periods, comparison, threshold, missing) in ALARMS.items():
        p = alarms[name]
        assert (p["Namespace"], p["MetricName"]) == (namespace, metric), name
        assert p.get("Statistic", p.get("ExtendedStatistic")) == stat, name
        assert (p["Period"], p["EvaluationPeriods"], p.get("DatapointsToAlarm", p["EvaluationPeriods"])) == (
            period, periods, DATAPOINTS.get(name, periods)), name
        assert (p["ComparisonOperator"], p["Threshold"], p["TreatMissingData"]) == (comparison, threshold, missing), name
        assert p["AlarmActions"] == [TOPIC] and p["OKActions"] == [TOPIC], name
        if namespace == metrics.NAMESPACE:
            assert metric in metrics.NAMES
            assert p["Dimensions"] == [{"Name": "service", "Value": metrics.SERVICE}]
    # Not created (and so not alarming) while a new stack's database is still being created.
    assert resources["NoTicksAlarm"]["DependsOn"] == "TickLoopSchedule"
    # 2 minutes without a tick, and a lag p99 over 2 s for 5 minutes, as the issue asks.
    assert alarms["NoTicksAlarm"]["Period"] * alarms["NoTicksAlarm"]["EvaluationPeriods"] == 120
    assert alarms["FireLagAlarm"]["Period"] * alarms["FireLagAlarm"]["EvaluationPeriods"] == 300
    # A quarantine alarms within 5 minutes and stays on for an hour: an entry that never heals is retried hourly
    # (tickwork.rules.quarantine.MAX_BACKOFF_MS), so it keeps the alarm on rather than flapping it.
    quarantined = alarms["QuarantinedEntriesAlarm"]
    assert quarantined["Period"] == 300
    assert quarantined["Period"] * quarantined["EvaluationPeriods"] * 1000 >= MAX_BACKOFF_MS


def test_alarms_watch_the_stacks_own_functions_and_failure_queue(default: Stack) -> None:
    resources = default.resources()
    dims = {n: r["Properties"]["Dimensions"] for n, r in resources.items() if r["Type"] == "AWS::CloudWatch::Alarm"}
    assert dims["ApiFunctionErrorsAlarm"] == [{"Name": "FunctionName", "Value": {"Ref": "ApiFunction"}}]
    assert dims["PollerFunctionErrorsAlarm"] == [{"Name": "FunctionName", "Value": {"Ref": "PollerFunction"}}]
    assert dims["ExecutorFunctionErrorsAlarm"] == dims["ExecutorThrottlesAlarm"] == [
        {"Name": "FunctionName", "Value": {"Ref": "ExecutorFunction"}}]
    # The executor's on-failure destination is the queue the alarm watches.
    config = resources["ExecutorFunctionEventInvokeConfig"]["Properties"]
    assert config["DestinationConfig"]["OnFailure"]["Destination"] == {"Fn::GetAtt": ["ExecutorFailureQueue", "Arn"]}
    assert dims["FailureQueueAlarm"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": ["ExecutorFailureQueue", "QueueName"]}}]


def test_the_free_storage_alarm_watches_the_stacks_database_only_when_the_stack_makes_it(default: Stack) -> None:
    alarm = default.resources()["DatabaseFreeStorageAlarm"]["Properties"]
    assert alarm["Dimensions"] == [{"Name": "DBInstanceIdentifier", "Value": {"Ref": "Database"}}]
    # Autoscaling acts at 10% free: on the default storage the alarm is what is left when it cannot.
    allocated_gib = int(default.params["DatabaseAllocatedStorage"])
    assert alarm["Threshold"] == allocated_gib * 1024 ** 3 // 10 and default.params["DatabaseMaxAllocatedStorage"] != "0"
    existing = Stack(DatabaseHost="db.example.com", DatabaseSecretArn="arn:aws:secretsmanager:us-east-1:1:secret:x")
    assert "DatabaseFreeStorageAlarm" not in existing.resources()


def test_the_email_subscriptions_exist_only_with_an_address() -> None:
    for parameter, name, topic in (("AlarmEmail", "OperatorEmailSubscription", TOPIC),
                                   ("RunFailureEmail", "RunFailuresEmailSubscription", RUN_FAILURES)):
        assert Stack().template["Parameters"][parameter]["Default"] == ""
        assert name not in Stack().resources()
        subscription = Stack(**{parameter: "ops@example.com"}).resources()[name]["Properties"]
        assert subscription == {"TopicArn": topic, "Protocol": "email", "Endpoint": {"Ref": parameter}}
        pattern = re.compile(Stack().template["Parameters"][parameter]["AllowedPattern"])
        assert pattern.fullmatch("") and pattern.fullmatch("ops@example.com")
        assert not pattern.fullmatch("not an address")


def test_poller_and_executor_may_publish_to_the_run_failures_topic_only(default: Stack) -> None:
    """Runs that failed for good go to a topic of their own: the alarms' topic gets alarms only."""
    resources = default.resources()
    publishes = [(name, s) for name, s in _statements(default.template) if "sns:Publish" in json.dumps(s["Action"])]
    assert {name for name, _ in publishes} == {"PollerFunctionRole", "ExecutorFunctionRole"}
    for _, statement in publishes:
        assert statement["Action"] == ["sns:Publish"]
        assert statement["Resource"]["Fn::Sub"][1] == {"topicName": {"Fn::GetAtt": ["RunFailuresTopic", "TopicName"]}}
    for function in ("PollerFunction", "ExecutorFunction"):
        assert resources[function]["Properties"]["Environment"]["Variables"]["OPERATOR_TOPIC_ARN"] == RUN_FAILURES
    assert "OPERATOR_TOPIC_ARN" not in resources["ApiFunction"]["Properties"]["Environment"]["Variables"]


# ------------------------------------------------------------------------------------------ budget


def test_the_default_connection_budget_fits_a_new_account_and_a_micro_instance(default: Stack) -> None:
    """A new account's quota of 10 concurrent executions bounds every function's environments; each
    environment holds at most its pool. db.t4g.micro: max_connections at most 1 GiB / 9,531,392 = 112."""
    resources = default.resources()
    pools = {f: int(default.value(resources[f]["Properties"]["Environment"]["Variables"]["TICKWORK_DB_POOL_SIZE"]))
             for f in ("ApiFunction", "PollerFunction", "ExecutorFunction")}
    assert pools == {"ApiFunction": 2, "PollerFunction": 3, "ExecutorFunction": 3}
    assert "ReservedConcurrentExecutions" not in resources["ExecutorFunction"]["Properties"] or default.value(
        resources["ExecutorFunction"]["Properties"]["ReservedConcurrentExecutions"]) == {"Ref": "AWS::NoValue"}
    quota = 10
    assert default.params["DatabaseInstanceClass"] == "db.t4g.micro"
    micro_max_connections = (1 << 30) // 9531392
    assert sum(pool * quota for pool in pools.values()) <= micro_max_connections - 3 - 20  # superuser + headroom


def test_executor_concurrency_reservation_is_a_parameter() -> None:
    executor = Stack(ExecutorReservedConcurrency="20")
    props = executor.resources()["ExecutorFunction"]["Properties"]
    assert executor.value(props["ReservedConcurrentExecutions"]) == "20"
    pool = props["Environment"]["Variables"]["TICKWORK_DB_POOL_SIZE"]
    assert Stack(ExecutorDatabasePoolSize="2").value(pool) == "2"


PROXY_RESOURCES = {"DatabaseProxy", "DatabaseProxyTargetGroup", "DatabaseProxyRole", "DatabaseProxySecurityGroup",
                   "ProxyIngressFromFunctions", "ProxyToDatabaseEgress", "DatabaseIngressFromProxy",
                   "FunctionToProxyEgress"}


def test_rds_proxy_is_off_by_default_and_functions_use_the_database() -> None:
    stack = Stack()
    assert not PROXY_RESOURCES & set(stack.resources())
    env = stack.resources()["ExecutorFunction"]["Properties"]["Environment"]["Variables"]
    assert stack.value(env["DATABASE_HOST"]) == {"Fn::GetAtt": ["Database", "Endpoint.Address"]}
    assert stack.value(env["TICKWORK_DB_PREPARED_STATEMENTS"]) == "on"


def test_rds_proxy_when_enabled_sits_between_the_functions_and_the_database() -> None:
    stack = Stack(RdsProxy="Enabled")
    resources = stack.resources()
    assert PROXY_RESOURCES <= set(resources)
    for function in ("ApiFunction", "PollerFunction", "ExecutorFunction"):
        env = resources[function]["Properties"]["Environment"]["Variables"]
        assert stack.value(env["DATABASE_HOST"]) == {"Fn::GetAtt": ["DatabaseProxy", "Endpoint"]}, function
        assert stack.value(env["TICKWORK_DB_PREPARED_STATEMENTS"]) == "off"
    proxy = resources["DatabaseProxy"]["Properties"]
    assert proxy["EngineFamily"] == "POSTGRESQL" and proxy["RequireTLS"] is True
    (auth,) = proxy["Auth"]
    assert auth["SecretArn"] == {"Fn::GetAtt": ["Database", "MasterUserSecret.SecretArn"]} and auth["IAMAuth"] == "DISABLED"
    target = resources["DatabaseProxyTargetGroup"]["Properties"]
    assert target["DBInstanceIdentifiers"] == [{"Ref": "Database"}]
    assert target["ConnectionPoolConfigurationInfo"]["MaxConnectionsPercent"] == {"Ref": "RdsProxyMaxConnectionsPercent"}
    # Its role reads that one secret and nothing else.
    role = resources["DatabaseProxyRole"]["Properties"]
    assert role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {"Service": "rds.amazonaws.com"}
    (statement,) = role["Policies"][0]["PolicyDocument"]["Statement"]
    assert (statement["Action"], statement["Resource"]) == (
        "secretsmanager:GetSecretValue", {"Fn::GetAtt": ["Database", "MasterUserSecret.SecretArn"]})
    # Security groups: functions -> proxy -> database, on 5432 only.
    rules = {n: resources[n]["Properties"] for n in ("ProxyIngressFromFunctions", "ProxyToDatabaseEgress",
                                                      "DatabaseIngressFromProxy", "FunctionToProxyEgress")}
    assert all((r["IpProtocol"], r["FromPort"], r["ToPort"]) == ("tcp", 5432, 5432) for r in rules.values())
    assert stack.value(rules["ProxyIngressFromFunctions"]["SourceSecurityGroupId"]) == {"Ref": "FunctionSecurityGroup"}
    assert rules["ProxyToDatabaseEgress"]["DestinationSecurityGroupId"] == {"Ref": "DatabaseSecurityGroup"}
    assert rules["DatabaseIngressFromProxy"]["SourceSecurityGroupId"] == {"Ref": "DatabaseProxySecurityGroup"}
    assert rules["FunctionToProxyEgress"]["DestinationSecurityGroupId"] == {"Ref": "DatabaseProxySecurityGroup"}
    # The migration waits for the proxy's target (it connects through it).
    ready = [stack.value(item) for item in resources["SchemaMigration"]["Properties"]["NetworkReady"]]
    assert {"Ref": "DatabaseProxyTargetGroup"} in ready


def test_rds_proxy_is_refused_with_an_existing_database() -> None:
    existing = dict(DatabaseHost="db.internal", DatabaseSecretArn="arn:aws:secretsmanager:us-east-1:123456789012:secret:x")
    assert Stack(**existing).failed_rules() == []
    assert Stack(RdsProxy="Enabled", **existing).failed_rules() == ["ProxyNeedsTheCreatedDatabase"]
    assert not PROXY_RESOURCES & set(Stack(RdsProxy="Enabled", **existing).resources())


# ------------------------------------------------------------------------------------------ TLS, API


def test_functions_verify_the_database_certificate_by_default(default: Stack) -> None:
    param = default.template["Parameters"]["DatabaseSslMode"]
    assert param["Default"] == "verify-full" and "require" in param["AllowedValues"]
    for function in ("ApiFunction", "PollerFunction", "ExecutorFunction"):
        env = default.resources()[function]["Properties"]["Environment"]["Variables"]
        assert env["DATABASE_SSLMODE"] == {"Ref": "DatabaseSslMode"}


@pytest.mark.parametrize(("ports", "open_ports"), [
    (None, [80, 443]),  # the default, "80,443"
    ("443", [443]),  # 443 stays open for the AWS APIs, once
    ("8443,80", [80, 443, 8443]),
    ("80,443,8080,8443,9000", [80, 443, 8080, 8443, 9000]),
])
def test_the_functions_security_group_lets_out_the_target_ports_the_functions_allow(
    ports: str | None, open_ports: list[int],
) -> None:
    """#22: a target port the security group drops would hang a run until its timeout; the API and the
    executor allow exactly TargetPorts (TICKWORK_TARGET_PORTS), the group lets those out."""
    stack = Stack() if ports is None else Stack(TargetPorts=ports)
    group = {"Ref": "FunctionSecurityGroup"}
    rules = stack.resources()["FunctionSecurityGroup"]["Properties"]["SecurityGroupEgress"] + [
        {k: stack.value(v) for k, v in r["Properties"].items()} for r in stack.resources().values()
        if r["Type"] == "AWS::EC2::SecurityGroupEgress" and r["Properties"]["GroupId"] == group
        and "CidrIp" in r["Properties"]]
    assert sorted(int(r["FromPort"]) for r in rules) == open_ports
    assert all(r["FromPort"] == r["ToPort"] and r["CidrIp"] == "0.0.0.0/0" for r in rules)
    assert stack.params["TargetPorts"] == (ports or "80,443")
    for function in ("ApiFunction", "ExecutorFunction"):
        env = stack.resources()[function]["Properties"]["Environment"]["Variables"]
        assert env["TICKWORK_TARGET_PORTS"] == {"Ref": "TargetPorts"}
    pattern = re.compile(stack.template["Parameters"]["TargetPorts"]["AllowedPattern"])
    assert pattern.match(ports or "80,443") and not pattern.match("80,443,1,2,3,4") and not pattern.match("80,")


def test_the_api_stage_is_throttled(default: Stack) -> None:
    stage = default.resources()["HttpApiApiGatewayDefaultStage"]["Properties"]
    assert stage["DefaultRouteSettings"] == {"ThrottlingRateLimit": {"Ref": "ApiThrottlingRateLimit"},
                                             "ThrottlingBurstLimit": {"Ref": "ApiThrottlingBurstLimit"}}
    params = default.template["Parameters"]
    assert 0 < int(params["ApiThrottlingRateLimit"]["Default"]) <= int(params["ApiThrottlingBurstLimit"]["Default"])


def test_x_ray_is_off_by_default_and_on_with_its_policies_when_asked() -> None:
    off, on = Stack(), Stack(Tracing="Active")
    xray = "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess"
    for function in ("ApiFunction", "PollerFunction", "ExecutorFunction"):
        assert "TracingConfig" not in off.resources()[function]["Properties"], function
        assert xray not in off.resources()[f"{function}Role"]["Properties"]["ManagedPolicyArns"]
        assert on.value(on.resources()[function]["Properties"]["TracingConfig"]["Mode"]) == "Active"
        assert xray in on.resources()[f"{function}Role"]["Properties"]["ManagedPolicyArns"]
    for stack, enabled in ((off, False), (on, True)):
        loop = stack.resources()["TickLoop"]["Properties"]
        assert stack.value(loop["TracingConfiguration"]["Enabled"]) is enabled
        policies = [stack.value(p) for p in stack.resources()["TickLoopRole"]["Properties"]["Policies"]]
        granted = any("xray:PutTraceSegments" in json.dumps(p) for p in policies if p != {"Ref": "AWS::NoValue"})
        assert granted is enabled


def test_the_custom_domain_exists_only_with_a_name_and_its_record_only_with_a_zone() -> None:
    domain = dict(DomainName="cron.example.com", CertificateArn="arn:aws:acm:us-east-1:123456789012:certificate/abc")
    names = {"ApiDomain", "ApiDomainMapping", "ApiDomainRecord"}
    assert not names & set(Stack().resources())
    assert "ApiCustomDomainUrl" not in {n for n, o in Stack().template["Outputs"].items()
                                        if "Condition" not in o or Stack().condition(o["Condition"])}
    without_zone = Stack(**domain)
    assert names & set(without_zone.resources()) == {"ApiDomain", "ApiDomainMapping"}
    with_zone = Stack(HostedZoneId="Z0123456789ABC", **domain)
    resources = with_zone.resources()
    assert names <= set(resources)
    mapping = resources["ApiDomainMapping"]["Properties"]
    assert mapping["ApiId"] == {"Ref": "HttpApi"} and mapping["Stage"] == {"Ref": "HttpApiApiGatewayDefaultStage"}
    (config,) = resources["ApiDomain"]["Properties"]["DomainNameConfigurations"]
    assert config == {"CertificateArn": {"Ref": "CertificateArn"}, "EndpointType": "REGIONAL", "SecurityPolicy": "TLS_1_2"}
    record = resources["ApiDomainRecord"]["Properties"]
    assert record["Type"] == "A" and record["AliasTarget"]["DNSName"] == {"Fn::GetAtt": ["ApiDomain", "RegionalDomainName"]}
    assert with_zone.failed_rules() == [] and without_zone.failed_rules() == []
    assert Stack(DomainName="cron.example.com").failed_rules() == ["DomainNeedsCertificate"]
    assert Stack(HostedZoneId="Z0123456789ABC").failed_rules() == ["HostedZoneNeedsDomain"]


def test_the_dashboard_and_topic_are_outputs(default: Stack) -> None:
    outputs = default.template["Outputs"]
    assert outputs["OperatorTopicArn"]["Value"] == TOPIC
    assert outputs["RunFailuresTopicArn"]["Value"] == RUN_FAILURES
    assert "${Dashboard}" in outputs["DashboardUrl"]["Value"]["Fn::Sub"]


def test_the_prod_environment_reserves_a_budget_its_instance_class_holds() -> None:
    import tomllib

    from tests.unit.test_template import ROOT, _overrides

    prod = _overrides(tomllib.loads((ROOT / "samconfig.toml").read_text())["prod"])
    stack = Stack(**prod)
    resources = stack.resources()
    budget = 0
    for function, reserved in (("ApiFunction", "ApiReservedConcurrency"), ("PollerFunction", "PollerReservedConcurrency"),
                               ("ExecutorFunction", "ExecutorReservedConcurrency")):
        props = resources[function]["Properties"]
        assert stack.value(props["ReservedConcurrentExecutions"]) == prod[reserved], function
        budget += int(prod[reserved]) * int(stack.value(props["Environment"]["Variables"]["TICKWORK_DB_POOL_SIZE"]))
    assert prod["DatabaseInstanceClass"] == "db.t4g.small"
    small_max_connections = (2 << 30) // 9531392
    assert budget <= small_max_connections - 3 - 20, budget
