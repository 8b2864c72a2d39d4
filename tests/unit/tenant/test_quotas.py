"""The quota rules without I/O: a schedule's runs a minute, the tenant's quotas in force, the checks."""
from __future__ import annotations

import pytest

from tickwork.errors import ConfigurationError, QuotaExceededError
from tickwork.schedule.engine import parse_schedule
from tickwork.settings import Settings
from tickwork.tenant import quotas


@pytest.mark.parametrize("expression,zone,runs", [
    ("* * * * * *", "UTC", 60),
    ("*/2 * * * * *", "UTC", 30),
    ("*/10 * * * * *", "Asia/Kolkata", 6),
    ("0,30 * * * * *", "UTC", 2),
    # The busiest 60 seconds, not the average: a burst of seconds inside one hour counts whole.
    ("59,0 * 9 * * *", "Europe/Paris", 2),
    ("* * * * *", "UTC", 1),
    ("0 30 2 * * *", "Europe/Paris", 1),
    ("every weekday at 17:00", "America/New_York", 1),
    ("rate(1 second)", "UTC", 60),
    ("rate(7 seconds)", "UTC", 9),
    ("rate(60 seconds)", "UTC", 1),
    ("rate(5 minutes)", "UTC", 1),
    ("at(2035-01-01T00:00:00)", "UTC", 1),
])
def test_a_schedule_counts_as_its_busiest_minute(expression: str, zone: str, runs: int) -> None:
    assert quotas.runs_per_minute(parse_schedule(expression, zone)) == runs


def test_overrides_replace_the_deployment_defaults_one_by_one() -> None:
    settings = Settings(database_url="", redis_url="", max_jobs=10, min_interval_seconds=2, max_runs_per_minute=100,
                        max_history_rows=500, max_runs_in_flight=20, max_storage_bytes=4096, max_replays_queued=30)
    assert quotas.effective(settings, {}) == quotas.Quotas(10, 2, 100, 500, 20, 4096, 30)
    assert quotas.effective(settings, {"max_jobs": 0, "min_interval_seconds": None}) == quotas.Quotas(
        0, 2, 100, 500, 20, 4096, 30)
    assert quotas.effective(settings, {"max_history_rows": 7}).max_history_rows == 7
    assert quotas.effective(settings, {"max_runs_in_flight": 3}).max_runs_in_flight == 3
    assert quotas.effective(settings, {"max_storage_bytes": 0}).max_storage_bytes == 0
    assert quotas.effective(settings, {"max_replays_queued": 0}).max_replays_queued == 0


def test_the_defaults_are_the_documented_ones() -> None:
    assert quotas.effective(Settings(database_url="", redis_url=""), {}) == quotas.Quotas(
        1000, 1, 6000, 1_000_000, 500, 256 * 1024 * 1024, 36_000)


def test_the_history_quota_default_is_a_setting() -> None:
    env = {"DATABASE_URL": "x", "REDIS_URL": "y"}
    assert Settings.from_env({**env, "TICKWORK_MAX_HISTORY_ROWS": "0"}).max_history_rows == 0
    with pytest.raises(ConfigurationError, match="TICKWORK_MAX_HISTORY_ROWS must be at least 0"):
        Settings.from_env({**env, "TICKWORK_MAX_HISTORY_ROWS": "-1"})


def test_the_storage_budget_and_the_key_count_cap_are_settings() -> None:
    env = {"DATABASE_URL": "x", "REDIS_URL": "y"}
    chosen = Settings.from_env({**env, "TICKWORK_MAX_STORAGE_BYTES": "0", "TICKWORK_MAX_IDEMPOTENCY_KEYS": "5"})
    assert (chosen.max_storage_bytes, chosen.max_idempotency_keys) == (0, 5)
    with pytest.raises(ConfigurationError, match="TICKWORK_MAX_STORAGE_BYTES must be at least 0"):
        Settings.from_env({**env, "TICKWORK_MAX_STORAGE_BYTES": "-1"})
    with pytest.raises(ConfigurationError, match="TICKWORK_MAX_IDEMPOTENCY_KEYS must be at least 1"):
        Settings.from_env({**env, "TICKWORK_MAX_IDEMPOTENCY_KEYS": "0"})


def test_each_check_names_its_quota_and_limit() -> None:
    limits = quotas.Quotas(max_jobs=2, min_interval_seconds=60, max_runs_per_minute=100, max_history_rows=10,
                           max_runs_in_flight=1, max_storage_bytes=1, max_replays_queued=5)
    quotas.check_job_count(limits, 1)
    quotas.check_runs(limits, 40, 60)
    quotas.check_interval(limits, parse_schedule("0 * * * * *"))
    quotas.check_interval(limits, parse_schedule("at(2035-01-01T00:00:00)"))
    for check, field in [(lambda: quotas.check_job_count(limits, 2), "max_jobs"),
                         (lambda: quotas.check_runs(limits, 41, 60), "max_runs_per_minute"),
                         (lambda: quotas.check_interval(limits, parse_schedule("*/30 * * * * *")),
                          "min_interval_seconds")]:
        with pytest.raises(QuotaExceededError) as caught:
            check()
        assert caught.value.field == field and caught.value.code == "quota_exceeded"
        assert str(caught.value.limit) in caught.value.message and field in caught.value.message
