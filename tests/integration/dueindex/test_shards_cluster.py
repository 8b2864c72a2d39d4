"""The sharded due index on a real Redis Cluster of 3 primaries (Debian's redis-server in cluster mode):
where a cluster differs from one server, every script must find its keys on one node and writes of
several shards must go to several nodes."""
from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import timedelta
from typing import Iterator

import pytest

from tests.conftest import RecordingInvoker
from tests.integration.dueindex.test_shards import EVERY_SECOND, T0, _assert_each_slot_ran_once, _tick
from tests.integration.helpers import due_index, insert_job
from tests.support import score_of
from tickwork.dueindex.shards import shard_of
from tickwork.timeutil import to_ms
from tickwork.wiring import Services, build_services
from tickwork_local import cluster

pytestmark = pytest.mark.skipif(not cluster.available(), reason="needs redis-server and redis-cli on PATH")


@pytest.fixture(scope="module")
def redis_cluster() -> Iterator[cluster.LocalCluster]:
    with cluster.LocalCluster(3) as started:
        yield started


@pytest.fixture
def on_cluster(services: Services, invoker: RecordingInvoker, redis_cluster: cluster.LocalCluster) -> Iterator[Services]:
    settings = replace(services.settings, redis_url=redis_cluster.url, due_index_shards=3, lookahead_ms=0,
                       namespace=f"cluster-{uuid.uuid4().hex[:8]}")
    svc = build_services(settings, invoker=invoker)
    yield svc
    svc.close()


def test_each_shard_lives_on_its_own_primary(on_cluster: Services) -> None:
    index = due_index(on_cluster)
    nodes = {on_cluster.redis.get_node_from_key(shard.due_key).port for shard in index.shards}
    assert len(nodes) == 3


def test_a_deployment_switched_to_three_shards_claims_all_of_them_and_rebuilds_a_lost_one(
    on_cluster: Services, invoker: RecordingInvoker,
) -> None:
    job_ids = [insert_job(on_cluster, schedule=EVERY_SECOND, next_run_at=T0) for _ in range(150)]
    first = _tick(on_cluster, 0)  # no stored count yet: switched from 1, rebuilt from Postgres, claimed
    assert first.relayout_from == 1 and first.rebuilt and first.dispatched == 150
    index = due_index(on_cluster)
    lost = index.shards[2]
    on_cluster.redis.delete(*lost.keys())
    second = _tick(on_cluster, 1)
    assert second.rebuilt and second.reindexed == sum(shard_of(j, 3) == 2 for j in job_ids)
    assert _tick(on_cluster, 2).dispatched == 150
    _assert_each_slot_ran_once(on_cluster, invoker, job_ids, 3)


def test_one_pipeline_carries_retries_of_every_shard(on_cluster: Services) -> None:
    """The executor queues retries of several runs in one pipeline: on a cluster it spans the nodes."""
    index = due_index(on_cluster)
    ids = [str(uuid.uuid4()) for _ in range(30)]
    pipe = index.pipeline()
    for execution_id in ids:
        index.schedule_execution(execution_id, 2, to_ms(T0 + timedelta(seconds=5)), pipeline=pipe)
    pipe.execute()
    assert {shard_of(execution_id, 3) for execution_id in ids} == {0, 1, 2}
    assert all(score_of(index, f"e:{execution_id}:2") == to_ms(T0) + 5000 for execution_id in ids)
