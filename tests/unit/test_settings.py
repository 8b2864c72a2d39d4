"""Settings read from the environment: what each variable accepts, and what a bad value says at cold start."""
from __future__ import annotations

import pytest

from tickwork.errors import ConfigurationError
from tickwork.settings import Settings

ENV = {"DATABASE_URL": "postgresql://h/db", "REDIS_URL": "redis://h:6379/0"}


def test_target_ports_are_any_by_default_and_a_list_when_set() -> None:
    """Empty keeps the local runtime and tests on random ports; the template sets its security group's."""
    assert Settings.from_env(ENV).target_ports == ()
    assert Settings.from_env({**ENV, "TICKWORK_TARGET_PORTS": ""}).target_ports == ()
    assert Settings.from_env({**ENV, "TICKWORK_TARGET_PORTS": "443, 80,443"}).target_ports == (80, 443)


def test_target_roles_are_tickwork_target_roles_of_any_account_unless_set() -> None:
    assert Settings.from_env(ENV).target_role_pattern == "arn:aws:iam::*:role/tickwork-target-*"
    assert Settings.from_env({**ENV, "TICKWORK_TARGET_ROLE_PATTERN": " "}).target_role_pattern == \
        "arn:aws:iam::*:role/tickwork-target-*"
    mine = "arn:aws:iam::123456789012:role/tickwork-target-*"
    assert Settings.from_env({**ENV, "TICKWORK_TARGET_ROLE_PATTERN": mine}).target_role_pattern == mine


@pytest.mark.parametrize("raw", ["80,https", "0", "65536", "80,,443", "-1"])
def test_target_ports_that_are_not_ports_fail_the_cold_start(raw: str) -> None:
    with pytest.raises(ConfigurationError, match="TICKWORK_TARGET_PORTS must be port numbers"):
        Settings.from_env({**ENV, "TICKWORK_TARGET_PORTS": raw})
