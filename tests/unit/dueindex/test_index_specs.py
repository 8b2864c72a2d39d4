"""IndexSpecs: the rebuild's spec of each stored job, parsed once per schedule, is exactly the spec the
API writes for that job (scheduling.job_spec), rate() anchors and windows included."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from tickwork.dueindex.entries import encode_spec
from tickwork.dueindex.specs import IndexSpecs
from tickwork.errors import ScheduleError
from tickwork.models import HttpRequest, Job, RetryPolicy
from tickwork.schedule import specs as scheduling

T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)
JOB = Job(id="job-1", tenant_id="t", name="n", schedule="0 30 9 * * MON-FRI", timezone="Europe/London",
          start_at=None, end_at=None, request=HttpRequest(url="https://example.com/"), retry=RetryPolicy(),
          status="active", next_run_at=T0, version=1, created_at=T0 - timedelta(days=3), updated_at=T0)


@pytest.mark.parametrize("job", [
    JOB,
    replace(JOB, version=4, catchup="all", catchup_window_seconds=0),
    replace(JOB, start_at=T0, end_at=T0 + timedelta(days=30)),
    replace(JOB, schedule="rate(90 seconds)", timezone="UTC"),
    replace(JOB, schedule="rate(90 seconds)", start_at=T0 + timedelta(hours=1)),
    replace(JOB, schedule="at(2026-12-24T18:00:00)"),
])
def test_each_spec_is_the_one_the_api_writes(job: Job) -> None:
    specs = IndexSpecs()
    assert specs.encoded(job) == encode_spec(scheduling.job_spec(job))
    assert specs.encoded(replace(job, id="job-2")) == encode_spec(scheduling.job_spec(job))


def test_a_spec_names_its_tenant_whose_backlog_share_the_job_takes() -> None:
    specs = IndexSpecs()
    other = replace(JOB, id="job-2", tenant_id="u")
    assert scheduling.job_spec(JOB)["t"] == "t" and scheduling.job_spec(other)["t"] == "u"
    assert specs.encoded(JOB) != specs.encoded(other) == encode_spec(scheduling.job_spec(other))


def test_jobs_sharing_a_schedule_share_a_spec_but_a_rate_counts_from_its_own_creation() -> None:
    specs = IndexSpecs()
    later = T0 - timedelta(seconds=7)
    cron, cron_later = JOB, replace(JOB, id="job-2", created_at=later)
    rate = replace(JOB, schedule="rate(90 seconds)")
    rate_later = replace(rate, id="job-2", created_at=later)
    assert specs.encoded(cron) is specs.encoded(cron_later)
    assert specs.encoded(rate) == encode_spec(scheduling.job_spec(rate))
    assert specs.encoded(rate_later) == encode_spec(scheduling.job_spec(rate_later)) != specs.encoded(rate)


def test_a_version_or_policy_change_is_a_different_spec() -> None:
    specs = IndexSpecs()
    seen = {specs.encoded(job) for job in (JOB, replace(JOB, version=2), replace(JOB, catchup="all"),
                                           replace(JOB, catchup_window_seconds=42))}
    assert len(seen) == 4


def test_a_schedule_that_no_longer_parses_raises_every_time() -> None:
    specs = IndexSpecs()
    broken = replace(JOB, schedule="not a schedule")
    for _ in range(2):
        with pytest.raises(ScheduleError):
            specs.encoded(broken)


@pytest.mark.parametrize("changes", [{"schedule": "0 H 9 * * MON-FRI"}, {"spread_seconds": 600}])
def test_a_spec_with_an_h_or_a_spread_is_each_jobs_own(changes: dict[str, object]) -> None:
    specs = IndexSpecs()
    first, second = replace(JOB, **changes), replace(JOB, id="job-2", **changes)
    assert specs.encoded(first) == encode_spec(scheduling.job_spec(first))
    assert specs.encoded(second) == encode_spec(scheduling.job_spec(second)) != specs.encoded(first)


def test_a_spec_written_before_spread_existed_reads_as_no_offset() -> None:
    spec = scheduling.job_spec(JOB)
    assert "offset_ms" not in spec["s"] and "hash_key" not in spec["s"]
    assert scheduling.schedule_of(spec).next_after(T0) == scheduling.job_schedule(JOB).next_after(T0)
