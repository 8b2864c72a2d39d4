"""Which shard holds what: pure functions of the namespace, the shard count and an id."""
from __future__ import annotations

import uuid
from collections import Counter

import pytest

from tickwork.dueindex.shards import CLUSTER_SLOTS, base_tag, cluster_slot, member_shard, shard_of, shard_tags
from tickwork.errors import ConfigurationError
from tickwork.settings import Settings


def test_one_shard_keeps_the_single_tag_of_an_unsharded_index() -> None:
    assert shard_tags("tickwork", 1) == ["{tickwork}"] == [base_tag("tickwork")]
    assert shard_of("any-job", 1) == 0 and member_shard("e:any:2", 1) == 0


def test_cluster_slot_is_the_one_redis_computes() -> None:
    # CLUSTER KEYSLOT foo = 12182 and KEYSLOT bar = 5061 (Redis cluster specification examples).
    assert cluster_slot("{foo}") == 12182 and cluster_slot("{bar}") == 5061


@pytest.mark.parametrize("count", [2, 3, 5, 16])
def test_each_shard_tag_lies_in_its_own_share_of_the_cluster_slots(count: int) -> None:
    tags = shard_tags("tickwork", count)
    assert len(set(tags)) == count
    for shard, tag in enumerate(tags):
        assert shard * CLUSTER_SLOTS // count <= cluster_slot(tag) < (shard + 1) * CLUSTER_SLOTS // count
        assert tag.startswith("{tickwork/")  # found by a scan of the namespace's keys


def test_two_shard_counts_never_share_a_tag() -> None:
    layouts = [set(shard_tags("tickwork", count)) for count in (1, 2, 3, 4)]
    assert sum(len(tags) for tags in layouts) == len(set().union(*layouts))


def test_jobs_spread_evenly_and_always_to_the_same_shard() -> None:
    ids = [str(uuid.UUID(int=i * 7919 + 1)) for i in range(3000)]
    counts = Counter(shard_of(job_id, 3) for job_id in ids)
    assert set(counts) == {0, 1, 2} and min(counts.values()) > 850
    assert [shard_of(job_id, 3) for job_id in ids] == [shard_of(job_id, 3) for job_id in ids]


def test_a_member_goes_where_its_job_or_its_execution_goes() -> None:
    job_id, execution_id = str(uuid.uuid4()), str(uuid.uuid4())
    assert member_shard(f"j:{job_id}", 5) == shard_of(job_id, 5)
    assert member_shard(f"e:{execution_id}:3", 5) == shard_of(execution_id, 5)
    notification_id = str(uuid.uuid4())  # a notification attempt goes by its notification, as a run by its id
    assert {member_shard(f"n:{notification_id}:{attempt}", 5) for attempt in (1, 2, 7)} == {shard_of(notification_id, 5)}


@pytest.mark.parametrize("count", [0, -1, 65])
def test_a_shard_count_out_of_range_is_refused(count: int) -> None:
    with pytest.raises(ConfigurationError, match="DUE_INDEX_SHARDS"):
        shard_tags("tickwork", count)


def test_the_shard_count_is_a_deploy_time_setting_defaulting_to_one() -> None:
    env = {"DATABASE_URL": "postgresql://x", "REDIS_URL": "redis://x"}
    assert Settings.from_env(env).due_index_shards == 1
    assert Settings.from_env({**env, "TICKWORK_DUE_INDEX_SHARDS": "3"}).due_index_shards == 3
