"""An AWS target's input rendered per attempt (tickwork.targets.aws.rendering): pure, pinned times."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from tickwork.errors import InvalidInputError, UnknownSecretError
from tickwork.models import StartedExecution
from tickwork.targets.aws import rendering
from tickwork.targets.aws.rendering import Context, check_saved_input, render, run_key
from tickwork.targetspec.aws import AwsTargetSpec

AT = datetime(2026, 3, 29, 1, 0, 7, 250_000, tzinfo=timezone.utc)
CONTEXT = Context(AT, "run-1", 3, "job-9")
MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:nightly"
ROLE = "arn:aws:iam::123456789012:role/tickwork-target-x"


def test_every_placeholder_is_the_attempts() -> None:
    template = ('{"at": "<aws.scheduler.scheduled-time>", "run": "<aws.scheduler.execution-id>", '
                '"n": <aws.scheduler.attempt-number>, "job": "<aws.scheduler.schedule-arn>"}')
    assert render(template, CONTEXT, {}) == (
        '{"at": "2026-03-29T01:00:07.250Z", "run": "run-1", "n": 3, "job": "job-9"}', set())


def test_secrets_are_replaced_after_the_placeholders_each_in_one_pass() -> None:
    secrets = {"TOKEN": "s3cr3t <aws.scheduler.execution-id>", "OTHER": "${secrets.TOKEN}"}
    text, used = render('${secrets.TOKEN}|${secrets.OTHER}|<aws.scheduler.execution-id>', CONTEXT, secrets)
    assert text == "s3cr3t <aws.scheduler.execution-id>|${secrets.TOKEN}|run-1"
    assert used == {"TOKEN", "OTHER"}
    assert rendering.secret_names("${secrets.TOKEN} ${secrets.OTHER} $secrets.NOT") == {"TOKEN", "OTHER"}


def test_a_secret_the_tenant_lacks_is_an_error_naming_it() -> None:
    with pytest.raises(UnknownSecretError) as raised:
        render("${secrets.GONE}", CONTEXT, {})
    assert raised.value.name == "GONE"


def test_a_run_is_named_by_its_id_and_replay_generation() -> None:
    run = StartedExecution("run-1", "job-9", "tenant", AT, 4, {}, {})
    assert run_key(run) == "run-1-0"
    assert run_key(StartedExecution("run-1", "job-9", "tenant", AT, 6, {}, {}, replay_count=2)) == "run-1-2"


def test_a_saved_input_is_checked_at_its_longest_rendering() -> None:
    limit = 256 * 1024
    placeholder = "<aws.scheduler.execution-id>"  # 28 characters, 36 rendered
    fits = AwsTargetSpec.from_dict({"arn": MACHINE, "role_arn": ROLE, "input": "x" * (limit - 36) + placeholder})
    check_saved_input(fits, secret_bytes=8192)
    over = AwsTargetSpec.from_dict({"arn": MACHINE, "role_arn": ROLE, "input": "x" * (limit - 35) + placeholder})
    with pytest.raises(InvalidInputError) as raised:
        check_saved_input(over, secret_bytes=8192)
    assert raised.value.field == "target.input" and str(limit) in raised.value.message
    secret = AwsTargetSpec.from_dict({"arn": MACHINE, "role_arn": ROLE, "input": "x" * (limit - 8191) + "${secrets.A}"})
    with pytest.raises(InvalidInputError):
        check_saved_input(secret, secret_bytes=8192)
