"""The credential of a Custom::TickworkJob (events/jobs_resource_create.json's ApiKey): a key with jobs:write
authorises its Create and Update and decides its tenant; its Delete needs none but the full StackId that put
the job; resources made before the key was required fail their next update naming the property."""
from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

from tests.conftest import Target
from tests.integration.ops.test_job_resource import (  # noqa: F401 - provider and tenant are fixtures
    NOW,
    SOURCE,
    Handler,
    _event,
    _job,
    _send,
    provider,
    tenant,
)
from tickwork.models import Job, JobDraft
from tickwork.ops.job_properties import CREDENTIAL_SINCE
from tickwork.scope import Scope
from tickwork.store import jobs as jobs_store
from tickwork.store import keys as keys_store
from tickwork.store.tenants import create_tenant
from tickwork.tenant import bykey
from tickwork.tenant.access import JOBS_READ, JOBS_WRITE
from tickwork.wiring import Services

def _key(db: psycopg.Connection, tenant_id: str, *scopes: str) -> str:
    return keys_store.create_key(db, tenant_id, "-".join(scopes), scopes, NOW)[1]


def _keyless(event: dict[str, Any]) -> dict[str, Any]:
    event["ResourceProperties"].pop("ApiKey")
    return event


def test_a_create_without_a_key_fails_naming_the_property_and_makes_nothing(
    provider: Handler, target: Target, services: Services, tenant: str,
) -> None:
    failed = _send(provider, target, _keyless(_event(target, "Create")))
    assert failed["Status"] == "FAILED"
    assert failed["Reason"] == (f"ApiKey: required since release {CREDENTIAL_SINCE}: an API key with jobs:write of "
                                "tenant reports (docs/jobs-as-code.md)"), failed
    assert _job(services, tenant, "nightly-report") is None


@pytest.mark.parametrize("api_key, reason", [
    ("tw_not_a_key_anyone_has", "ApiKey: invalid API key"),
    ("{{resolve:secretsmanager:tickwork/reports:SecretString:key}}",
     "ApiKey: a {{resolve:...}} reference CloudFormation did not resolve"),
])
def test_a_key_that_is_not_one_fails_and_is_never_shown(
    provider: Handler, target: Target, services: Services, tenant: str, api_key: str, reason: str,
) -> None:
    failed = _send(provider, target, _event(target, "Create", ApiKey=api_key))
    assert failed["Status"] == "FAILED" and failed["Reason"].startswith(reason), failed
    assert api_key not in json.dumps(failed) and _job(services, tenant, "nightly-report") is None


def test_a_read_only_key_changes_nothing(provider: Handler, target: Target, services: Services, tenant: str,
                                         db: psycopg.Connection) -> None:
    created = _send(provider, target, _event(target, "Create"))
    before = _job(services, tenant, "nightly-report")
    reader = _key(db, tenant, JOBS_READ)
    for event in (_event(target, "Create", Key="other", ApiKey=reader),
                  _event(target, "Update", created["PhysicalResourceId"], Name="renamed", ApiKey=reader)):
        failed = _send(provider, target, event)
        assert (failed["Status"], failed["Reason"]) == ("FAILED", "ApiKey: this API key lacks the scope jobs:write")
    assert _job(services, tenant, "other") is None and _job(services, tenant, "nightly-report") == before


def test_a_key_of_another_tenant_acts_for_its_own_tenant_only(
    provider: Handler, target: Target, services: Services, tenant: str, db: psycopg.Connection,
) -> None:
    """Tenant B's deploy key cannot reach tenant A's jobs, whatever the resource names: the key's tenant is the
    job's tenant, and a Tenant naming another one fails."""
    created = _send(provider, target, _event(target, "Create"))
    theirs = _job(services, tenant, "nightly-report")
    other = create_tenant(db, "mallory")
    mallory = _key(db, other, JOBS_READ, JOBS_WRITE)
    refused = _send(provider, target, _event(target, "Update", created["PhysicalResourceId"], ApiKey=mallory,
                                             Request={"Url": "https://mallory.example.com/${secrets.TOKEN}"}))
    assert refused["Status"] == "FAILED"
    assert refused["Reason"] == (f"Tenant: reports is not the tenant of ApiKey (its tenant is {other}); leave "
                                 "Tenant out, or name that tenant"), refused
    by_id = _send(provider, target, _event(target, "Create", ApiKey=mallory, Tenant=tenant))
    assert by_id["Status"] == "FAILED" and by_id["Reason"].startswith("Tenant: "), by_id
    # Without Tenant, the key's own tenant gets a job of its own under the same key.
    own = _event(target, "Create", ApiKey=mallory)
    del own["ResourceProperties"]["Tenant"]
    made = _send(provider, target, own)
    assert (made["Status"], made["PhysicalResourceId"]) == ("SUCCESS", f"{other}/nightly-report"), made
    assert _job(services, tenant, "nightly-report") == theirs
    assert _job(services, other, "nightly-report") is not None


def test_the_creating_stack_deletes_its_job_without_a_key(
    provider: Handler, target: Target, services: Services, tenant: str, db: psycopg.Connection,
) -> None:
    """A stack can always be deleted: its Delete needs no key (the one it was made with may be revoked since)."""
    created = _send(provider, target, _event(target, "Create"))
    assert created["Status"] == "SUCCESS" and _job(services, tenant, "nightly-report") is not None, created
    db.execute("UPDATE api_keys SET revoked_at = %s", (NOW,))
    deleted = _send(provider, target, _keyless(_event(target, "Delete", created["PhysicalResourceId"])))
    assert deleted["Status"] == "SUCCESS", deleted
    assert _job(services, tenant, "nightly-report") is None


@pytest.mark.parametrize("stack_id", [
    # the same stack name, made again (another id), in another account, in another region
    "arn:aws:cloudformation:eu-west-3:123456789012:stack/reports/00000000-1111-2222-3333-444444444444",
    "arn:aws:cloudformation:eu-west-3:210987654321:stack/reports/7c1d2e30-0000-11ef-0000-0a1b2c3d4e5f",
    "arn:aws:cloudformation:eu-west-1:123456789012:stack/reports/7c1d2e30-0000-11ef-0000-0a1b2c3d4e5f",
])
def test_a_delete_from_another_stack_id_leaves_the_job(
    provider: Handler, target: Target, services: Services, tenant: str, stack_id: str,
) -> None:
    created = _send(provider, target, _event(target, "Create"))
    job = _job(services, tenant, "nightly-report")
    assert created["Status"] == "SUCCESS" and job is not None, created
    forged = _event(target, "Delete", created["PhysicalResourceId"])
    forged["StackId"] = stack_id
    assert _send(provider, target, forged)["Status"] == "SUCCESS"  # nothing of its own to delete
    assert _job(services, tenant, "nightly-report") == job


def test_a_malformed_stack_id_is_refused(provider: Handler, target: Target, services: Services, tenant: str) -> None:
    for request_type in ("Create", "Delete"):
        event = _event(target, request_type, f"{tenant}/nightly-report")
        event["StackId"] = "arn:aws:cloudformation:eu-west-3:123456789012:stack/reports/" + "x" * 5000
        failed = _send(provider, target, event)
        assert failed["Status"] == "FAILED" and failed["Reason"].startswith("StackId: "), failed
    assert _job(services, tenant, "nightly-report") is None


def _made_by_the_old_release(services: Services, tenant: str) -> Job:
    """What a Custom::TickworkJob made before the credential: the job and its source, no stack id recorded."""
    scope = Scope(services.db, services.index, services.settings, tenant, NOW, services.keyring)
    put, _ = bykey.put_job_by_key(scope, "nightly-report", JobDraft.from_dict(dict(
        name="Nightly report", schedule="0 30 2 * * *", timezone="Europe/Paris", start_at=None, end_at=None,
        request={"method": "POST", "url": "https://abcdef1234.execute-api.eu-west-3.amazonaws.com/run",
                 "headers": {}}, retry={}, key="nightly-report", source=SOURCE)))
    return put.job


def test_an_old_key_less_resource_fails_its_next_update_naming_the_property(
    provider: Handler, target: Target, services: Services, tenant: str,
) -> None:
    old = _made_by_the_old_release(services, tenant)
    physical_id = f"{tenant}/nightly-report"
    old_properties = _keyless(_event(target, "Create"))["ResourceProperties"]
    update = _keyless(_event(target, "Update", physical_id, old_properties, Name="Nightly report (v2)"))
    failed = _send(provider, target, update)
    assert (failed["Status"], failed["PhysicalResourceId"]) == ("FAILED", physical_id)
    assert failed["Reason"] == (f"ApiKey: required since release {CREDENTIAL_SINCE}: an API key with jobs:write of "
                                "tenant reports (docs/jobs-as-code.md)"), failed
    assert _job(services, tenant, "nightly-report") == old
    # Nor does the old resource's Delete, which no stack id vouches for, touch it.
    _send(provider, target, _event(target, "Delete", physical_id))
    assert _job(services, tenant, "nightly-report") == old
    # With the key, the update goes through and the stack is recorded: its Delete then needs no key.
    keyed = _send(provider, target, _event(target, "Update", physical_id, old_properties, Name="Nightly report (v2)"))
    assert keyed["Status"] == "SUCCESS" and keyed["Data"]["JobId"] == old.id, keyed
    assert _send(provider, target, _keyless(_event(target, "Delete", physical_id)))["Status"] == "SUCCESS"
    assert _job(services, tenant, "nightly-report") is None


def test_the_update_that_adds_the_key_and_a_new_key_lets_the_old_jobs_delete_go_through(
    provider: Handler, target: Target, services: Services, tenant: str,
) -> None:
    """An old resource replaced (Key changed) in the update that gives it ApiKey: its job is recorded as the
    stack's then, so the Delete CloudFormation sends for the old id removes it."""
    old = _made_by_the_old_release(services, tenant)
    old_properties = _keyless(_event(target, "Create"))["ResourceProperties"]
    replaced = _send(provider, target, _event(target, "Update", f"{tenant}/nightly-report", old_properties,
                                              Key="nightly-report-v2"))
    assert (replaced["Status"], replaced["PhysicalResourceId"]) == ("SUCCESS", f"{tenant}/nightly-report-v2")
    assert _job(services, tenant, "nightly-report") == old
    _send(provider, target, _keyless(_event(target, "Delete", f"{tenant}/nightly-report")))
    assert _job(services, tenant, "nightly-report") is None


def test_a_rollback_to_a_key_less_definition_is_authorised_by_the_key_it_leaves(
    provider: Handler, target: Target, services: Services, tenant: str,
) -> None:
    """An update that added ApiKey went through and a later resource of the stack failed: CloudFormation rolls
    this resource back with an Update to its old, key-less properties, the keyed ones as OldResourceProperties."""
    _made_by_the_old_release(services, tenant)
    physical_id = f"{tenant}/nightly-report"
    key_less = _keyless(_event(target, "Create"))["ResourceProperties"]
    keyed = _event(target, "Update", physical_id, key_less, Name="Nightly report (v2)")
    assert _send(provider, target, keyed)["Status"] == "SUCCESS"
    rollback = _event(target, "Update", physical_id, keyed["ResourceProperties"])
    rollback["ResourceProperties"] = key_less
    assert _send(provider, target, rollback)["Status"] == "SUCCESS"
    job = _job(services, tenant, "nightly-report")
    assert job is not None and job.name == "Nightly report"


def test_a_job_made_by_the_api_between_the_read_and_the_write_is_refused_in_the_write(
    provider: Handler, target: Target, services: Services, tenant: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Break: the provider's first read finds no job with the key, and the API creates one before the provider
    writes. Must hold: the ownership check runs again in the write's transaction and refuses to take it over."""
    scope = Scope(services.db, services.index, services.settings, tenant, NOW, services.keyring)
    theirs, _ = bykey.put_job_by_key(scope, "nightly-report", JobDraft.from_dict(dict(
        name="made with the API", schedule="rate(1 hour)", timezone="UTC", start_at=None, end_at=None,
        request={"method": "GET", "url": "https://example.com/sync", "headers": {}}, retry={}, key="nightly-report")))
    real, stale = jobs_store.get_job_by_key, [True]

    def first_read_stale(conn: Any, tenant_id: str, key: str, *, lock: bool = False) -> Job | None:
        if stale and not lock:
            stale.pop()
            return None  # as read just before the API's create
        return real(conn, tenant_id, key, lock=lock)

    monkeypatch.setattr(jobs_store, "get_job_by_key", first_read_stale)
    refused = _send(provider, target, _event(target, "Create"))
    assert refused["Status"] == "FAILED", refused
    assert refused["Reason"].startswith("Key: job nightly-report already exists, managed by no stack"), refused
    assert _job(services, tenant, "nightly-report") == theirs.job
