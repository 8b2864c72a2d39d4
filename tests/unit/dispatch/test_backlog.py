"""A tick's fair share of the backlog, decided without I/O: who may claim what, and where the next page starts."""
from __future__ import annotations

import pytest

from tickwork.dispatch.backlog import BacklogShares, Cursor
from tickwork.dueindex.entries import DueEntry
from tickwork.errors import ConfigurationError
from tickwork.settings import DEFAULT_BACKLOG_PER_TENANT, Settings

T0 = 1_796_040_000_000


def _job(member: str, tenant: str | None, score: int = T0) -> DueEntry:
    spec = {"v": 1, "s": {"canonical": "* * * * * *"}, **({"t": tenant} if tenant else {})}
    return DueEntry(f"j:{member}", score, spec)


def test_each_tenant_claims_at_most_its_share_of_a_tick_across_pages() -> None:
    shares = BacklogShares(per_tenant=2)
    page = [_job("a1", "a"), _job("a2", "a"), _job("a3", "a"), _job("b1", "b")]
    assert [e.member for e in shares.take(page)] == ["j:a1", "j:a2", "j:b1"]
    assert [e.member for e in shares.take([_job("a4", "a"), _job("b2", "b"), _job("b3", "b")])] == ["j:b2"]
    assert shares.take([_job("a1", "a")]) == []  # a job met again later in the tick: its tenant's share is used


def test_one_shot_dispatches_and_jobs_without_a_spec_take_no_share() -> None:
    shares = BacklogShares(per_tenant=1)
    retry, lost_spec = DueEntry("e:run-1:2", T0, None), DueEntry("j:x", T0, None)
    page = [_job("a1", "a"), retry, lost_spec, _job("a2", "a"), _job("old", None), _job("older", None)]
    assert shares.take(page) == [page[0], retry, lost_spec, page[4]]  # a spec without "t": one shared share


def test_the_next_page_starts_past_the_entries_passed_over_at_its_last_score() -> None:
    page = [_job("a1", "a", T0), _job("a2", "a", T0 + 1000), _job("a3", "a", T0 + 1000), _job("b1", "b", T0 + 1000)]
    cursor = Cursor().after(page, taken=[page[0], page[3]])
    assert cursor == Cursor(T0 + 1000, 2)  # a2 and a3 stay at that score, ahead of whatever follows
    # A page all at the cursor's score adds to what was passed over there.
    same = [_job("a4", "a", T0 + 1000), _job("c1", "c", T0 + 1000)]
    assert cursor.after(same, taken=[same[1]]) == Cursor(T0 + 1000, 3)
    assert cursor.after([_job("d1", "d", T0 + 2000)], taken=[]) == Cursor(T0 + 2000, 1)


def test_the_share_is_a_setting_of_at_least_one_claim() -> None:
    env = {"DATABASE_URL": "postgresql://h/db", "REDIS_URL": "redis://h:6379/0"}
    assert Settings.from_env(env).backlog_per_tenant == DEFAULT_BACKLOG_PER_TENANT == 1000
    assert Settings.from_env({**env, "TICKWORK_BACKLOG_PER_TENANT": "5000"}).backlog_per_tenant == 5000
    with pytest.raises(ConfigurationError, match="TICKWORK_BACKLOG_PER_TENANT must be at least 1"):
        Settings.from_env({**env, "TICKWORK_BACKLOG_PER_TENANT": "0"})
