"""A Custom::TickworkJob's properties read as the API's job body, and the API's complaints named back in the
template's words."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from tickwork.api.models import JobCreate
from tickwork.errors import InvalidInputError
from tickwork.ops.job_properties import (
    MAX_SOURCE_CHARS,
    checked_stack_id,
    field_reason,
    job_source,
    read_properties,
    same_stack,
    template_path,
    validation_reason,
)

STACK_ID = "arn:aws:cloudformation:eu-west-3:123456789012:stack/reports-prod/5b6a2e10-0000-11ef-0000-0a1b2c3d4e5f"


def _properties(**extra: object) -> dict[str, object]:
    return {"ServiceToken": "arn:aws:lambda:eu-west-3:123456789012:function:tickwork-JobsResourceFunction-X",
            "ServiceTimeout": "300", "Tenant": "reports", "Key": "nightly-report", "Name": "Nightly report",
            "Schedule": "0 30 2 * * *", "Request": {"Method": "POST", "Url": "https://example.com/run"}, **extra}


def test_names_become_the_apis_recursively_and_header_names_stay_as_written() -> None:
    declared = read_properties(_properties(
        Timezone="Europe/Paris", CatchupWindowSeconds="600", PauseAfterFailures="3", Tags=["env:prod", "team=bi"],
        Retry={"MaxAttempts": "4", "DelaySeconds": "30", "PastNextRun": "false"},
        Success={"StatusCodes": ["200", "2xx"], "BodyContains": "ok"},
        Notify={"Url": "https://example.com/alerts", "On": ["failure", "paused"]},
        Request={"Method": "POST", "Url": "https://example.com/run", "TimeoutSeconds": "20",
                 "Headers": {"X-Api-Key": "${secrets.REPORTS_KEY}", "content-type": "application/json"}},
    ))
    assert (declared.tenant, declared.key) == ("reports", "nightly-report")
    assert declared.body == {
        "name": "Nightly report", "schedule": "0 30 2 * * *", "timezone": "Europe/Paris",
        "catchup_window_seconds": "600", "pause_after_failures": "3", "tags": ["env:prod", "team=bi"],
        "retry": {"max_attempts": "4", "delay_seconds": "30", "past_next_run": "false"},
        "success": {"status_codes": ["200", "2xx"], "body_contains": "ok"},
        "notify": {"url": "https://example.com/alerts", "on": ["failure", "paused"]},
        "request": {"method": "POST", "url": "https://example.com/run", "timeout_seconds": "20",
                    "headers": {"X-Api-Key": "${secrets.REPORTS_KEY}", "content-type": "application/json"}},
    }


def test_the_strings_cloudformation_sends_are_read_as_numbers_and_booleans_by_the_apis_model() -> None:
    body = read_properties(_properties(CatchupWindowSeconds="600", Retry={"MaxAttempts": "4", "PastNextRun": "true"},
                                       Success={"StatusCodes": ["204", "2xx"]})).body
    job = JobCreate.model_validate(body)
    assert (job.catchup_window_seconds, job.retry.max_attempts, job.retry.past_next_run) == (600, 4, True)
    assert job.success is not None and job.success.status_codes == [204, "2xx"]


def test_key_is_required_and_a_given_tenant_may_not_be_blank() -> None:
    for properties in ({k: v for k, v in _properties().items() if k != "Key"}, _properties(Tenant=" ")):
        with pytest.raises(InvalidInputError) as raised:
            read_properties(properties)
        assert (raised.value.message, raised.value.field in ("Key", "Tenant")) == ("required", True)


def test_the_key_and_the_tenant_are_read_apart_from_the_body_and_tenant_may_be_left_out() -> None:
    declared = read_properties({k: v for k, v in _properties(ApiKey=" tw_key ").items() if k != "Tenant"})
    assert (declared.tenant, declared.api_key) == (None, "tw_key")
    assert "api_key" not in declared.body and "tenant" not in declared.body
    assert read_properties(_properties()).api_key is None


@pytest.mark.parametrize("stack_id", [
    STACK_ID,
    "arn:aws-cn:cloudformation:cn-north-1:123456789012:stack/a/5b6a2e10-0000-11ef-0000-0a1b2c3d4e5f",
    "arn:aws-us-gov:cloudformation:us-gov-west-1:123456789012:stack/A-1/5b6a2e10-0000-11ef-0000-0a1b2c3d4e5f",
])
def test_a_stack_id_is_a_stacks_arn(stack_id: str) -> None:
    assert checked_stack_id(stack_id) == stack_id


@pytest.mark.parametrize("stack_id", [
    None, "", "reports", STACK_ID + "/extra", STACK_ID.replace("123456789012", "1234"),
    STACK_ID.replace("stack/reports-prod", "stack/" + "r" * 129), STACK_ID.replace(":stack/", ":changeSet/"),
    STACK_ID.replace("reports-prod", "1reports"), STACK_ID + "\n",
])
def test_anything_else_is_refused_naming_stack_id(stack_id: object) -> None:
    with pytest.raises(InvalidInputError) as raised:
        checked_stack_id(stack_id)
    assert raised.value.field == "StackId"


def test_names_that_are_not_pascal_case_are_unknown_all_named_at_once() -> None:
    with pytest.raises(InvalidInputError) as raised:
        read_properties(_properties(schedule="* * * * * *", Request={"Url": "https://example.com", "method": "GET"}))
    assert raised.value.message == "unknown properties: Request.method, schedule (properties are PascalCase)"


def test_the_source_is_the_providers_to_set() -> None:
    with pytest.raises(InvalidInputError) as raised:
        read_properties(_properties(Source="tickwork.yaml"))
    assert raised.value.field == "Source"


@pytest.mark.parametrize("field, named", [
    ("request.url", "Request.Url"), ("retry.max_attempts", "Retry.MaxAttempts"),
    ("catchup_window_seconds", "CatchupWindowSeconds"), ("success.status_codes.1", "Success.StatusCodes.1"),
    ("notify.on", "Notify.On"), ("tags.2", "Tags.2"), ("request.headers.x-api_key", "Request.Headers.x-api_key"),
])
def test_api_fields_are_named_as_the_template_writes_them(field: str, named: str) -> None:
    assert template_path(field) == named


def _errors(body: dict[str, object]) -> list[dict[str, object]]:
    with pytest.raises(ValidationError) as raised:
        JobCreate.model_validate(body)
    return list(raised.value.errors())


def test_a_complaint_names_the_field_both_ways_in_the_apis_words() -> None:
    body = read_properties(_properties(Request={"Url": "", "Method": "POST"})).body
    assert validation_reason(_errors(body)) == "Request.Url (request.url): String should have at least 1 character"
    body = read_properties(_properties(Retry={"MaxAttempts": "eleven"})).body
    reason = validation_reason(_errors(body))
    assert reason.startswith("Retry.MaxAttempts (retry.max_attempts): Input should be a valid integer"), reason


def test_unknown_fields_are_named_all_at_once_in_the_templates_words() -> None:
    body = read_properties(_properties(Schedual="* * * * * *", Retry={"MaxAttempt": "3"})).body
    assert validation_reason(_errors(body)) == "unknown properties: Retry.MaxAttempt, Schedual"


def test_a_required_field_left_out_is_named() -> None:
    body = read_properties(_properties()).body
    del body["schedule"]  # (Request is not required by itself: a job has either it or a target)
    assert validation_reason(_errors(body)) == "Schedule (schedule): field required"


def test_a_reason_about_a_template_name_says_it_once() -> None:
    assert field_reason("Tenant", "no tenant named x") == "Tenant: no tenant named x"
    assert field_reason("schedule", "bad") == "Schedule (schedule): bad"
    assert field_reason(None, "bad") == "bad"


def test_the_source_names_the_stack_and_the_resource_within_the_apis_bounds() -> None:
    assert job_source(STACK_ID, "NightlyReport") == "cfn:reports-prod/NightlyReport"
    long_stack = STACK_ID.replace("reports-prod", "s" * 128)
    first, second = job_source(long_stack, "A" * 200), job_source(long_stack, "A" * 199 + "B")
    assert len(first) == MAX_SOURCE_CHARS and first != second
    assert same_stack(first, long_stack) and same_stack(second, long_stack) and not same_stack(first, STACK_ID)
    assert same_stack("cfn:reports-prod/Old", STACK_ID)
    assert not same_stack("cfn:reports-prod-2/Old", STACK_ID) and not same_stack(None, STACK_ID)


def test_the_source_fits_the_apis_pattern() -> None:
    body = read_properties(_properties()).body
    job = JobCreate.model_validate({**body, "key": "nightly-report", "source": job_source(STACK_ID, "Nightly")})
    assert job.source == "cfn:reports-prod/Nightly"
