"""What the audit log records of a job's change (tickwork.tenant.audit): the fields that differ as the API
shows them, the job's state besides its definition, nothing for a no-op, and a new job's fields from nothing."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

import pytest

from tickwork.models import HttpRequest, Job, RetryPolicy
from tickwork.tenant import audit
from tickwork.tenant.definition import FieldChange

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
JOB = Job(id="job-1", tenant_id="t", name="nightly", schedule="0 2 * * *", timezone="UTC", start_at=None,
          end_at=None, request=HttpRequest(url="https://example.com/", method="GET",
                                           headers={"Authorization": "\nsealed:v2:abc", "X-Team": "a"}),
          retry=RetryPolicy(strategy="none"), status="active", next_run_at=T0, version=1, created_at=T0, updated_at=T0)


def test_a_job_unchanged_but_for_its_bookkeeping_has_no_changes() -> None:
    assert audit.job_changes(JOB, replace(JOB, next_run_at=None, version=2, updated_at=T0.replace(hour=13))) == ()


def test_changes_name_each_field_before_and_after_with_sensitive_headers_masked() -> None:
    headers = {"Authorization": "\nsealed:v2:def", "X-Team": "b"}
    changed = replace(JOB, name="renamed", request=replace(JOB.request, headers=headers), status="paused", key="k")
    assert audit.job_changes(JOB, changed) == (
        FieldChange("name", "nightly", "renamed"),
        FieldChange("request.headers.Authorization", "***", "***"),
        FieldChange("request.headers.X-Team", "a", "b"),
        FieldChange("status", "active", "paused"),
        FieldChange("key", None, "k"),
    )


def test_a_new_job_is_its_fields_from_nothing_without_the_empty_ones() -> None:
    fields = {c.field: c for c in audit.created_fields(JOB)}
    assert all(c.old is None for c in fields.values())
    assert fields["request.headers.Authorization"].new == "***"
    assert (fields["name"].new, fields["status"].new, fields["spread_seconds"].new) == ("nightly", "active", 0)
    assert "description" not in fields and "start_at" not in fields and "key" not in fields


def test_an_unknown_action_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown audit action"):
        audit.record(None, None, "job.exploded")  # type: ignore[arg-type]
