"""The Custom::TickworkJob provider driven by CloudFormation's events (events/jobs_resource_create.json):
the jobs handler puts and deletes real jobs in Postgres and the due index, and PUTs its answer to the
ResponseURL, played by a local HTTP server, on every path before its own timeout."""
from __future__ import annotations

import json
import time
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any, Callable, Iterator

import psycopg
import pytest

from tests.conftest import Target
from tests.integration.ops.cloudformation import FakeContext, cfn_event, cfn_responses
from tests.support import score_of
from tickwork.dueindex.entries import job_member
from tickwork.errors import NotFoundError
from tickwork.models import Job, JobDraft, SuccessRule
from tickwork.ops import custom_resource
from tickwork.ops.custom_resource import budget_seconds
from tickwork.ops.job_resource import handle_job_resource
from tickwork.ops.response_url import ResponseHosts
from tickwork.scope import Scope
from tickwork.tenant import secrets as tenant_secrets
from tickwork.store import keys as keys_store
from tickwork.store.filters import AuditFilter
from tickwork.store.tenants import create_api_key, create_tenant
from tickwork.tenant import audit, bykey
from tickwork.timeutil import to_ms
from tickwork.wiring import Services, configure
from tickwork.wiring import services as current_services

Handler = Callable[[dict[str, Any], Any], Any]
NOW = datetime(2026, 3, 12, 10, 0, tzinfo=timezone.utc)
# 02:30 in Paris (UTC+1 until the 29th) on the first day after NOW.
FIRST_RUN = "2026-03-13T01:30:00.000Z"
SOURCE = "cfn:reports/NightlyReport"
# The ApiKey of events/jobs_resource_create.json.
EVENT_KEY = "tw_example_cloudformation_key_do_not_use"


@pytest.fixture
def provider(services: Services, target: Target) -> Iterator[Handler]:
    """The jobs function as its handler runs it (functions/jobs_resource), on the test's services, its clock
    pinned at NOW; production's target rules; answering the local ResponseURL as well as CloudFormation's
    (the deployed handler answers only CloudFormation's: test_a_forged_response_url_is_refused...)."""
    pinned = replace(services, settings=replace(services.settings, allow_private_targets=False),
                     clock=lambda: NOW.timestamp())
    configure(pinned)
    hosts = ResponseHosts(also=(target.url,))
    yield lambda event, context: handle_job_resource(current_services, event, budget_seconds(context), hosts=hosts)
    configure(services)


@pytest.fixture
def tenant(db: psycopg.Connection) -> str:
    """The tenant "reports", holding the key the sample event's ApiKey is (every scope)."""
    tenant_id = create_tenant(db, "reports")
    create_api_key(db, tenant_id, token=EVENT_KEY, name="deploy")
    return tenant_id


def _event(target: Target, request_type: str, physical_id: str | None = None, old: dict[str, Any] | None = None,
           **properties: Any) -> dict[str, Any]:
    event = cfn_event("jobs_resource_create.json", target, request_type, physical_id)
    event["ResourceProperties"].update(properties)
    if old is not None:
        event["OldResourceProperties"] = old
    return event


def _send(provider: Handler, target: Target, event: dict[str, Any]) -> dict[str, Any]:
    result = provider(event, None)
    response = cfn_responses(target)[-1]
    assert response == result
    assert {k: response[k] for k in ("StackId", "RequestId", "LogicalResourceId")} == {
        k: event[k] for k in ("StackId", "RequestId", "LogicalResourceId")}
    return response


def _job(services: Services, tenant_id: str, key: str) -> Job | None:
    scope = Scope(services.db, services.index, services.settings, tenant_id, NOW, services.keyring)
    try:
        return bykey.get_job_by_key(scope, key).job
    except NotFoundError:
        return None


def test_create_puts_the_job_and_answers_its_id_and_next_run(
    provider: Handler, target: Target, services: Services, tenant: str,
) -> None:
    response = _send(provider, target, _event(target, "Create"))
    assert response["Status"] == "SUCCESS", response
    assert response["PhysicalResourceId"] == f"{tenant}/nightly-report"
    job = _job(services, tenant, "nightly-report")
    assert job is not None
    assert response["Data"] == {"JobId": job.id, "NextRunAt": FIRST_RUN}
    assert (job.key, job.source, job.name, job.timezone) == ("nightly-report", SOURCE, "Nightly report", "Europe/Paris")
    assert job.request.url == "https://abcdef1234.execute-api.eu-west-3.amazonaws.com/run"
    assert job.request.method == "POST"
    assert score_of(services.index, job_member(job.id)) == to_ms(job.next_run_at)  # due: it will run


def test_the_tenant_may_be_named_by_its_id(provider: Handler, target: Target, services: Services, tenant: str) -> None:
    response = _send(provider, target, _event(target, "Create", Tenant=tenant.upper()))
    assert (response["Status"], response["PhysicalResourceId"]) == ("SUCCESS", f"{tenant}/nightly-report")


def test_an_update_of_a_field_keeps_the_job_and_its_version(
    provider: Handler, target: Target, services: Services, tenant: str,
) -> None:
    created = _send(provider, target, _event(target, "Create"))
    before = _job(services, tenant, "nightly-report")
    old = _event(target, "Create")["ResourceProperties"]
    updated = _send(provider, target, _event(target, "Update", created["PhysicalResourceId"], old,
                                             Name="Nightly report (v2)", Retry={"MaxAttempts": "5"}))
    assert updated["Status"] == "SUCCESS", updated
    assert updated["PhysicalResourceId"] == created["PhysicalResourceId"]
    assert updated["Data"] == created["Data"]
    after = _job(services, tenant, "nightly-report")
    assert before is not None and after is not None
    assert (after.id, after.name, after.retry.max_attempts) == (before.id, "Nightly report (v2)", 5)
    assert after.version == before.version  # the timing did not change


def test_an_update_that_changes_nothing_writes_nothing(
    provider: Handler, target: Target, services: Services, tenant: str,
) -> None:
    created = _send(provider, target, _event(target, "Create"))
    before = _job(services, tenant, "nightly-report")
    again = _event(target, "Update", created["PhysicalResourceId"], _event(target, "Create")["ResourceProperties"])
    assert _send(provider, target, again)["Status"] == "SUCCESS"
    assert _job(services, tenant, "nightly-report") == before


def test_the_audit_log_names_the_stack_and_cloudformations_request_for_each_change(
    provider: Handler, target: Target, services: Services, tenant: str, db: psycopg.Connection,
) -> None:
    create = _event(target, "Create")
    created = _send(provider, target, create)
    old = create["ResourceProperties"]
    update = _event(target, "Update", created["PhysicalResourceId"], old, Name="Nightly report (v2)")
    unchanged = _event(target, "Update", created["PhysicalResourceId"], update["ResourceProperties"],
                       Name="Nightly report (v2)")
    delete = _event(target, "Delete", created["PhysicalResourceId"])
    for event in (update, unchanged, delete):
        assert _send(provider, target, event)["Status"] == "SUCCESS"
    scope = Scope(services.db, services.index, services.settings, tenant, NOW, services.keyring)
    found = audit.list_events(scope, AuditFilter(), 10, None).items
    assert {(e.request_id, e.action) for e in found} == {
        (create["RequestId"], "job.created"), (update["RequestId"], "job.updated"), (delete["RequestId"], "job.deleted")}
    # The stack, and the key that authorised each write; the Delete needs none and names none.
    deploy_key = keys_store.authenticate(db, EVENT_KEY)
    assert deploy_key is not None
    assert {(e.action, e.key_id, e.key_name, e.client_ip) for e in found} == {
        ("job.created", deploy_key.key_id, "cloudformation:reports", None),
        ("job.updated", deploy_key.key_id, "cloudformation:reports", None),
        ("job.deleted", None, "cloudformation:reports", None)}
    (changed,) = [e for e in found if e.action == "job.updated"]
    assert changed.changes == [{"field": "name", "before": "Nightly report", "after": "Nightly report (v2)"}]


def test_a_key_change_replaces_the_job_and_deleting_the_old_id_removes_only_the_old_job(
    provider: Handler, target: Target, services: Services, tenant: str,
) -> None:
    created = _send(provider, target, _event(target, "Create"))
    old_props = _event(target, "Create")["ResourceProperties"]
    replaced = _send(provider, target, _event(target, "Update", created["PhysicalResourceId"], old_props,
                                              Key="nightly-report-v2"))
    assert replaced["Status"] == "SUCCESS", replaced
    assert replaced["PhysicalResourceId"] == f"{tenant}/nightly-report-v2"
    new_job = _job(services, tenant, "nightly-report-v2")
    assert new_job is not None and replaced["Data"]["JobId"] == new_job.id != created["Data"]["JobId"]
    assert _job(services, tenant, "nightly-report") is not None  # until CloudFormation deletes it
    deleted = _send(provider, target, _event(target, "Delete", created["PhysicalResourceId"]))
    assert (deleted["Status"], deleted["PhysicalResourceId"]) == ("SUCCESS", created["PhysicalResourceId"])
    assert _job(services, tenant, "nightly-report") is None
    assert _job(services, tenant, "nightly-report-v2") == new_job


@pytest.mark.parametrize("properties, named", [
    ({"Schedule": "bogus"}, "Schedule (schedule): "),
    ({"Request": {"Url": "ftp://x"}}, "Request.Url (request.url): "),
    ({"Retry": {"MaxAttempts": "11"}}, "Retry.MaxAttempts (retry.max_attempts): "),
    ({"Key": "Nightly Report"}, "Key (key): "),
    ({"Schedual": "* * * * * *", "Request": {"Url": "https://example.com", "Methd": "GET"}},
     "unknown properties: "),
])
def test_an_invalid_property_fails_naming_it_and_its_delete_touches_nothing(
    provider: Handler, target: Target, services: Services, tenant: str, properties: dict[str, Any], named: str,
) -> None:
    kept = _send(provider, target, _event(target, "Create", Key="kept"))
    failed = _send(provider, target, _event(target, "Create", **properties))
    assert failed["Status"] == "FAILED" and failed["Reason"].startswith(named), failed
    assert failed["Data"] == {}
    # CloudFormation rolls a failed create back with a Delete of the id it answered: nothing to delete.
    rolled_back = _send(provider, target, _event(target, "Delete", failed["PhysicalResourceId"]))
    assert (rolled_back["Status"], rolled_back["PhysicalResourceId"]) == ("SUCCESS", failed["PhysicalResourceId"])
    assert _job(services, tenant, "kept") is not None and kept["Status"] == "SUCCESS"


def test_unknown_properties_are_all_named(provider: Handler, target: Target, tenant: str) -> None:
    failed = _send(provider, target, _event(target, "Create", Schedual="* * * * * *",
                                            Request={"Url": "https://example.com", "Methd": "GET"}))
    assert failed["Reason"] == "unknown properties: Request.Methd, Schedual", failed


def test_a_tenant_that_is_not_the_keys_fails(provider: Handler, target: Target, tenant: str) -> None:
    failed = _send(provider, target, _event(target, "Create", Tenant="reprots"))
    assert (failed["Status"], failed["Reason"]) == ("FAILED", (
        f"Tenant: reprots is not the tenant of ApiKey (its tenant is {tenant}); leave Tenant out, or name that tenant"))


def test_deleting_a_job_already_gone_succeeds(provider: Handler, target: Target, services: Services, tenant: str) -> None:
    created = _send(provider, target, _event(target, "Create"))
    scope = Scope(services.db, services.index, services.settings, tenant, NOW, services.keyring)
    bykey.delete_job_by_key(scope, "nightly-report")
    deleted = _send(provider, target, _event(target, "Delete", created["PhysicalResourceId"]))
    assert deleted["Status"] == "SUCCESS", deleted


def test_a_key_another_source_manages_is_refused_and_a_repeated_create_is_harmless(
    provider: Handler, target: Target, services: Services, tenant: str,
) -> None:
    scope = Scope(services.db, services.index, services.settings, tenant, NOW, services.keyring)
    put, _ = bykey.put_job_by_key(scope, "hourly-sync", JobDraft.from_dict(dict(
        name="sync", schedule="rate(1 hour)", timezone="UTC", start_at=None, end_at=None,
        request={"method": "GET", "url": "https://example.com/sync", "headers": {}}, retry={},
        key="hourly-sync", source="tickwork.yaml")))
    theirs = put.job
    refused = _send(provider, target, _event(target, "Create", Key="hourly-sync"))
    assert refused["Status"] == "FAILED"
    assert refused["Reason"].startswith("Key: job hourly-sync already exists, managed by tickwork.yaml"), refused
    assert _job(services, tenant, "hourly-sync") == theirs
    # Nor does the failed create's rollback delete their job.
    _send(provider, target, _event(target, "Delete", refused["PhysicalResourceId"]))
    assert _job(services, tenant, "hourly-sync") == theirs

    first = _send(provider, target, _event(target, "Create"))
    second = _send(provider, target, _event(target, "Create"))
    assert first == {**second, "RequestId": first["RequestId"]}


def test_a_resource_renamed_in_the_template_takes_the_job_over_and_the_old_names_delete_leaves_it(
    provider: Handler, target: Target, services: Services, tenant: str,
) -> None:
    created = _send(provider, target, _event(target, "Create"))
    renamed = _event(target, "Create")
    renamed["LogicalResourceId"] = "Nightly"
    taken = _send(provider, target, renamed)
    assert taken["Status"] == "SUCCESS" and taken["Data"] == created["Data"]
    _send(provider, target, _event(target, "Delete", created["PhysicalResourceId"]))  # the old name
    job = _job(services, tenant, "nightly-report")
    assert job is not None and job.source == "cfn:reports/Nightly"


def test_a_job_of_another_source_is_not_deleted(provider: Handler, target: Target, services: Services,
                                                tenant: str) -> None:
    created = _send(provider, target, _event(target, "Create"))
    other_stack = _event(target, "Delete", created["PhysicalResourceId"])
    other_stack["StackId"] = other_stack["StackId"].replace("stack/reports/", "stack/reports-copy/")
    assert _send(provider, target, other_stack)["Status"] == "SUCCESS"
    assert _job(services, tenant, "nightly-report") is not None


def test_the_strings_cloudformation_sends_are_read_as_numbers_and_booleans(
    provider: Handler, target: Target, services: Services, tenant: str,
) -> None:
    response = _send(provider, target, _event(
        target, "Create", CatchupWindowSeconds="600", PauseAfterFailures="3", Tags=["env:prod", "team=bi"],
        Retry={"MaxAttempts": "4", "DelaySeconds": "30", "PastNextRun": "false"},
        Success={"StatusCodes": ["204", "3xx"]}, Notify={"Url": "https://example.com/alerts", "On": ["failure"]},
        Request={"Method": "POST", "Url": "https://example.com/run", "TimeoutSeconds": "20", "Body": "{}"}))
    assert response["Status"] == "SUCCESS", response
    job = _job(services, tenant, "nightly-report")
    assert job is not None
    assert (job.catchup_window_seconds, job.pause_after_failures, job.tags) == (600, 3, ("env:prod", "team=bi"))
    assert (job.retry.max_attempts, job.retry.delay_seconds, job.retry.past_next_run) == (4, 30, False)
    assert job.success == SuccessRule((204, "3xx"))
    assert job.notify is not None and job.notify.on == ("failure",)
    assert job.request.timeout_seconds == 20


def test_header_names_are_kept_and_a_secret_reference_is_stored_as_written(
    provider: Handler, target: Target, services: Services, tenant: str,
) -> None:
    scope = Scope(services.db, services.index, services.settings, tenant, NOW, services.keyring)
    missing = _send(provider, target, _event(target, "Create", Request={
        "Url": "https://example.com/run", "Headers": {"Authorization": "Bearer ${secrets.SYNC_TOKEN}"}}))
    assert missing["Reason"] == ("Request.Headers.Authorization (request.headers.Authorization): "
                                 "unknown secret SYNC_TOKEN"), missing
    tenant_secrets.put_secret(scope, "SYNC_TOKEN", "s3cr3t-value")
    response = _send(provider, target, _event(target, "Create", Request={
        "Url": "https://example.com/run",
        "Headers": {"Authorization": "Bearer ${secrets.SYNC_TOKEN}", "x-Request_Source": "cfn"}}))
    assert response["Status"] == "SUCCESS", response
    job = _job(services, tenant, "nightly-report")
    assert job is not None
    assert set(job.request.headers) == {"Authorization", "x-Request_Source"}
    assert "s3cr3t-value" not in json.dumps([r["body"] for r in target.requests])


def test_a_put_held_up_past_the_budget_is_answered_failed_in_time(
    provider: Handler, target: Target, services: Services, tenant: str,
) -> None:
    """Break: another transaction holds the job's row, so the update waits on its lock. Must hold: the
    provider answers FAILED, saying so, once its budget is spent, not when Lambda kills it."""
    created = _send(provider, target, _event(target, "Create"))
    job_id = created["Data"]["JobId"]
    remaining = custom_resource.RESPONSE_MARGIN_SECONDS + 1.5  # a budget of 1.5 s
    with services.db.connection() as holder, holder.transaction():
        holder.execute("SELECT 1 FROM jobs WHERE id = %s FOR UPDATE", (job_id,))
        began = time.monotonic()
        late = provider(_event(target, "Update", created["PhysicalResourceId"], Name="held"),
                        FakeContext(remaining_ms=int(remaining * 1000)))
        took = time.monotonic() - began
    assert (late["Status"], late["Reason"]) == ("FAILED", "did not finish within 1.5 s"), late
    assert late["PhysicalResourceId"] == created["PhysicalResourceId"]
    assert took < 3, took
    assert cfn_responses(target)[-1] == late


def test_an_unknown_resource_type_is_refused(provider: Handler, target: Target, services: Services,
                                             tenant: str) -> None:
    event = _event(target, "Create")
    event["ResourceType"] = "Custom::Something"
    failed = _send(provider, target, event)
    assert failed["Status"] == "FAILED" and "Custom::Something" in failed["Reason"]
    assert _job(services, tenant, "nightly-report") is None


def test_a_failing_response_url_is_tried_again_within_the_margin(target: Target) -> None:
    target.statuses = [503, 500]
    response = {"Status": "SUCCESS", "Data": {}}
    assert custom_resource.send(custom_resource._http(), f"{target.url}/response?X-Amz-Signature=0000", response)
    assert [json.loads(r["body"]) for r in target.requests] == [response] * 3


def test_a_response_url_that_does_not_answer_is_given_up_on_within_the_margin(target: Target) -> None:
    target.delay_seconds = 5.0
    began = time.monotonic()
    sent = custom_resource.send(custom_resource._http(), f"{target.url}/response?X-Amz-Signature=0000",
                                {"Status": "FAILED"}, within=1.5)
    assert not sent and time.monotonic() - began < 2.5
    assert len(target.requests) >= 1  # it was tried


def test_a_forged_response_url_is_refused_with_no_request_and_no_job(
    target: Target, services: Services, handler: Callable[[str], Handler], tenant: str,
) -> None:
    """The deployed handler answers only CloudFormation's response bucket: an event sent straight to the
    function (lambda:InvokeFunction) with a URL of the sender's choosing gets no PUT there, and does nothing."""
    configure(replace(services, clock=lambda: NOW.timestamp()))
    try:
        for url in (f"{target.url}/response?X-Amz-Signature=0000",
                    "http://cloudformation-custom-resource-response-euwest3.s3.eu-west-3.amazonaws.com/x",
                    f"https://cloudformation-custom-resource-response-euwest3.s3.eu-west-3.amazonaws.com@127.0.0.1:"
                    f"{target.url.rsplit(':', 1)[1]}/x"):
            event = _event(target, "Create")
            event["ResponseURL"] = url
            refused = handler("jobs_resource")(event, None)
            assert refused["Status"] == "FAILED" and refused["Reason"].startswith("ResponseURL: "), refused
    finally:
        configure(services)
    assert target.requests == []
    assert _job(services, tenant, "nightly-report") is None

