"""The reviewed findings on the template AWS receives (template.yaml as SAM transforms it), each with its reason.

tests/unit/test_template_deployable.py fails on any cfn-lint or checkov finding not listed here, and on an
entry here that no longer matches a finding (so the list only shrinks with the template). Keep it short:
a finding we can fix in template.yaml is fixed there, not listed.
"""
from __future__ import annotations

# (rule id, resource): what cfn-lint reports about the resources SAM generates, and why it stays.
CFN_LINT_KNOWN: dict[tuple[str, str], str] = {
    ("I3042", "HttpApi"): "SAM writes the authorizer's URI in the OpenAPI body it generates as a literal "
                          "arn:aws:apigateway ARN; right for the commercial partition the stack targets.",
    ("W1030", "Tracing"): "with Tracing=Active SAM copies `!Ref Tracing` into each TracingConfig.Mode; cfn-lint "
                          "also tries the value Disabled, for which SAM writes no TracingConfig at all.",
}

# (check id, resource): checkov checks that do not apply to Tickwork, and why.
CHECKOV_SKIPPED: dict[tuple[str, str], str] = {
    ("CKV_AWS_27", "ExecutorFailureQueue"): "encrypted at rest with SqsManagedSseEnabled (SSE-SQS); checkov only "
                                            "counts a KMS key, and the queue holds run ids, no secrets.",
    **{("CKV_AWS_158", group): "CloudWatch Logs encrypts every log group at rest; the lines hold no secrets "
                               "(tickwork.http.redaction), so a KMS key would add cost and nothing to protect."
       for group in ("ApiFunctionLogGroup", "PollerFunctionLogGroup", "ExecutorFunctionLogGroup",
                     "MigrationsFunctionLogGroup", "JobsResourceFunctionLogGroup", "HttpApiAccessLogGroup",
                     "TickLoopLogGroup")},
    **{("CKV_AWS_116", function): "no dead-letter queue needed: the API is invoked synchronously, the executor has "
                                  "an SQS on-failure destination, a missed maintenance pass is redone a minute later."
       for function in ("ApiFunction", "PollerFunction", "ExecutorFunction")},
    **{("CKV_AWS_116", function): "no dead-letter queue needed: it answers CloudFormation on every path, and an "
                                  "event it never answered fails the deploy at ServiceTimeout."
       for function in ("MigrationsFunction", "JobsResourceFunction")},
    ("CKV_AWS_115", "MigrationsFunction"): "runs only at deploys; reserving concurrency for it would take from the "
                                           "account's pool for good, and two at once are serialised by an advisory lock.",
    ("CKV_AWS_115", "JobsResourceFunction"): "runs only while stacks declaring jobs deploy; a reservation would take from "
                                             "the account's pool for good (a new account's 10 cannot spare it).",
    **{("CKV_AWS_173", function): "the environment holds no secret (hosts, ARNs; logins are read from Secrets "
                                  "Manager), and Lambda encrypts it at rest with its own key."
       for function in ("ApiFunction", "PollerFunction", "ExecutorFunction", "MigrationsFunction",
                        "JobsResourceFunction")},
    ("CKV_AWS_157", "Database"): "Multi-AZ is on with Stage=prod; the dev stage stays single-AZ, half the cost.",
    ("CKV_AWS_118", "Database"): "no enhanced monitoring: the dashboard's RDS metrics suffice, and it needs a "
                                 "monitoring role and costs per instance.",
    ("CKV_AWS_161", "Database"): "the functions log in with the RDS-managed secret, rotated every 7 days; IAM "
                                 "authentication would cap new connections per second and change the login code.",
    ("CKV_AWS_31", "NodeCache"): "TLS is required (TransitEncryptionMode) and only the functions' security group "
                                 "reaches it; an AUTH user needs the functions to read its secret (follow-up).",
}
