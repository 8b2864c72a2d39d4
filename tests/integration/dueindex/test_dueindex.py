"""The due index against real Redis: the Lua claim is a compare-and-set, the tick lock is token-checked."""
from __future__ import annotations

from tests.support import fetch_due, hold_tick_lock, mark_built, score_of
from tickwork.dueindex.entries import Claim, SetAside, Setting
from tickwork.dueindex.index import TICKED_SECOND_TTL_MS, DueIndex
from tickwork.wiring import Services

SPEC = {"v": 1, "s": {"canonical": "* * * * *"}}


def test_fetch_returns_due_entries_earliest_first_with_specs(services: Services) -> None:
    index = DueIndex(services.redis, services.settings.namespace)
    index.put_job("b", SPEC, 2_000)
    index.put_job("a", SPEC, 1_000)
    index.put_job("later", SPEC, 9_000)
    index.schedule_execution("x", 2, 1_500)
    intact, entries = fetch_due(index, max_score=5_000, limit=10)
    assert not intact  # nothing rebuilt this namespace yet
    assert [(e.member, e.score) for e in entries] == [("j:a", 1_000), ("e:x:2", 1_500), ("j:b", 2_000)]
    assert entries[0].spec == SPEC and entries[1].spec is None


def test_claim_advances_only_entries_still_at_the_expected_score(services: Services) -> None:
    index = DueIndex(services.redis, services.settings.namespace)
    index.put_job("a", SPEC, 1_000)
    index.put_job("b", SPEC, 1_000)
    won = index.claim([Claim("j:a", 1_000, 61_000), Claim("j:b", 999, 61_000)])
    assert won == [True, False]
    assert score_of(index, "j:a") == 61_000 and score_of(index, "j:b") == 1_000
    # The job never left the set: a second claimer with the old score loses instead of re-adding it.
    assert index.claim([Claim("j:a", 1_000, 61_000)]) == [False]


def test_claim_with_no_next_slot_removes_job_and_spec(services: Services) -> None:
    index = DueIndex(services.redis, services.settings.namespace)
    index.put_job("once", SPEC, 1_000)
    assert index.claim([Claim("j:once", 1_000, None)]) == [True]
    assert score_of(index, "j:once") is None
    assert services.redis.hget(index.specs_key, "once") is None


def test_keys_share_one_hash_tag_for_cluster_mode(services: Services) -> None:
    index = DueIndex(services.redis, services.settings.namespace)
    tag = "{" + services.settings.namespace + "}"
    assert all(key.startswith(tag + ":") for key in (index.due_key, index.specs_key, index.tick_lock_key))


def test_tick_lock_is_exclusive_and_only_its_holder_releases_it(services: Services) -> None:
    index = DueIndex(services.redis, services.settings.namespace)
    assert hold_tick_lock(index, "mine", 5_000)
    assert not hold_tick_lock(index, "theirs", 5_000)
    assert not index.release_tick_lock("theirs")
    assert index.release_tick_lock("mine")
    assert hold_tick_lock(index, "theirs", 5_000)


def test_every_tick_records_its_time_whether_or_not_it_gets_the_lock(services: Services) -> None:
    index = DueIndex(services.redis, services.settings.namespace)
    assert index.last_tick_ms() is None
    assert index.acquire_tick("mine", 5_000, 1_000) == (True, 1)
    assert index.acquire_tick("theirs", 5_000, 2_000) == (False, 1)  # another poller holds this second's lock
    assert index.last_tick_ms() == 2_000  # ...but a poller is ticking: what GET /health asks
    assert index.last_tick_key.startswith("{" + services.settings.namespace + "}:")


def test_a_second_is_marked_ticked_only_by_the_poller_that_took_the_lock(services: Services) -> None:
    index = DueIndex(services.redis, services.settings.namespace)
    assert hold_tick_lock(index, "still running", 5_000)
    assert index.acquire_tick("kept out", 5_000, 1_500, second=1) == (False, 1)
    assert not services.redis.exists(index.ticked_second_key(1))
    assert index.release_tick_lock("still running")
    assert index.acquire_tick("first", 5_000, 1_600, second=1) == (True, 1)
    assert 0 < services.redis.pttl(index.ticked_second_key(1)) <= TICKED_SECOND_TTL_MS
    assert index.release_tick_lock("first")
    assert index.acquire_tick("second", 5_000, 1_700, second=1) == (False, 1)  # the lock is free, the second taken
    assert index.last_tick_ms() == 1_700
    assert index.ticked_second_key(1).startswith("{" + services.settings.namespace + "}:")


def test_put_job_with_keep_score_does_not_rewind_a_live_job(services: Services) -> None:
    index = DueIndex(services.redis, services.settings.namespace)
    index.put_job("a", SPEC, 5_000)
    index.put_job("a", SPEC, 1_000, keep_score=True)
    assert score_of(index, "j:a") == 5_000


def test_fetch_reports_the_index_intact_once_marked_built(services: Services) -> None:
    index = DueIndex(services.redis, services.settings.namespace)
    mark_built(index, 1)
    assert fetch_due(index, max_score=0, limit=1) == (True, [])
    services.redis.delete(index.marker_key)
    assert fetch_due(index, max_score=0, limit=1) == (False, [])


def test_set_aside_moves_only_what_is_still_where_it_was_and_puts_back_only_what_is_away(services: Services) -> None:
    """The quarantine's script (tickwork.dispatch.quarantine): the claim's compare-and-set, the backoff of each
    member's failures in a row (counted here unless given), and a one-shot claimed away put back only if absent."""
    index = DueIndex(services.redis, services.settings.namespace, shards=2)
    index.put_job("a", SPEC, 1_000)
    index.put_job("moved", SPEC, 1_000)
    index.schedule_execution("back", 1, 7_000)  # someone put it back already
    steps = [5_000, 10_000, 20_000]
    settings = [Setting("j:a", 1_000, None), Setting("j:moved", 999, None), Setting("e:gone:1", None, None),
                Setting("e:back:1", None, None), Setting("j:counted", None, 7)]
    placed = index.set_aside(settings, 100_000, steps)
    assert placed == [SetAside(1, 105_000, True), SetAside(1, 105_000, False), SetAside(1, 105_000, True),
                      SetAside(1, 105_000, False), SetAside(7, 120_000, True)]
    assert [score_of(index, m) for m in ("j:a", "j:moved", "e:gone:1", "e:back:1")] == [105_000, 1_000, 105_000, 7_000]
    again = index.set_aside([Setting("j:a", 105_000, None)], 110_000, steps)
    assert again == [SetAside(2, 120_000, True)]  # the second failure in a row waits twice as long
    # A claim won clears the member's count: its next failure is a first one again.
    assert index.claim([Claim("j:a", 120_000, 121_000)]) == [True]
    assert index.set_aside([Setting("j:a", 121_000, None)], 130_000, steps) == [SetAside(1, 135_000, True)]
