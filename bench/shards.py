"""Claims per second of the due index at 1, 2 and 3 shards, on a Redis Cluster of 3 primaries.

The benchmark starts its own cluster (tickwork_local.cluster: Debian's redis-server in cluster mode,
temporary directories, free ports, torn down after) and talks to it with redis-py's RedisCluster, as a
deployment on a cluster-mode cache does. For each shard count it indexes the same jobs, all due at one
instant, and times the claim path of a tick without Postgres: per shard, `Shard.fetch_due_counting` (the due
entries with their specs, one Lua call per batch of 1,000), `planning.plan_batch` (each job's next slot),
`Shard.claim` (the compare-and-set of every score, one Lua call per batch), until the shard is empty.
Postgres is left out on purpose: its cost per run is the same whatever the shard count (docs/scaling.md
has it), and this measures the ceiling sharding lifts.

Two ways to claim the shards at once are measured:
- **threads**: what one tick does (`Poller._drain_shards`), one thread per shard in one process;
- **processes**: one claiming process per shard (the "one poller per shard set" deployment), started
  and lined up before the clock starts.
Wall-clock claims per second depend on the client's CPU as much as the cache's: on a 2-core machine
the claiming processes and the three redis-servers share the same cores. So each round also reads how
long each node spent running the scripts (INFO commandstats, `usec` of EVALSHA): claims divided by the
busiest node's script time is the ceiling the cache side sets when the claimers have cores of their
own, which is what sharding lifts.
Rounds interleave the shard counts (1, 2, 3, 1, 2, 3, ...) so load from elsewhere on the machine falls
on all of them alike; the median and the best round are reported.
"""
from __future__ import annotations

import multiprocessing
import statistics
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import redis

from bench.harness import mark_built
from bench.phases import Unavailable
from tickwork.dispatch.planning import plan_batch
from tickwork.dueindex.entries import encode_spec, job_member
from tickwork.dueindex.index import DueIndex
from tickwork.dueindex.shard import Shard
from tickwork.schedule import specs as scheduling
from tickwork.schedule.engine import parse_schedule
from tickwork.settings import DEFAULT_BATCH_SIZE, Settings
from tickwork.wiring import connect_redis
from tickwork_local import cluster

SHARD_COUNTS = (1, 2, 3)
# A due instant far from any real one: the claim maths is the same, and no clock is involved.
DUE_MS = 1_800_000_000_000
INDEX_CHUNK = 2000


def _client(url: str) -> Any:
    return connect_redis(Settings(database_url="", redis_url=url))


def _load(client: Any, index: DueIndex, jobs: int) -> None:
    """Index `jobs` per-second jobs due at DUE_MS, written straight into their shards' keys (setup only)."""
    spec = encode_spec(scheduling.index_spec(parse_schedule("* * * * * *", "UTC"), 1))
    ids = [str(uuid.uuid4()) for _ in range(jobs)]
    for start in range(0, jobs, INDEX_CHUNK):
        by_shard: dict[int, list[str]] = {}
        for job_id in ids[start:start + INDEX_CHUNK]:
            by_shard.setdefault(index.number_of_job(job_id), []).append(job_id)
        for n, chunk in by_shard.items():
            shard = index.shards[n]
            client.zadd(shard.due_key, {job_member(job_id): DUE_MS for job_id in chunk})
            client.hset(shard.specs_key, mapping={job_id: spec for job_id in chunk})
    mark_built(index, DUE_MS)


def claim_shard(shard: Shard) -> int:
    """The claim loop of one shard in a tick, Postgres left out; returns how many jobs it claimed."""
    claimed = 0
    while True:
        _, entries, _ = shard.fetch_due_counting(DUE_MS, DEFAULT_BATCH_SIZE, 0, 0)
        if not entries:
            return claimed
        plan = plan_batch(entries, DUE_MS)
        claimed += sum(shard.claim([claim for claim, _ in plan.claims]))


def _threads(index: DueIndex) -> tuple[int, float]:
    with ThreadPoolExecutor(max_workers=index.count) as pool:
        started = time.perf_counter()
        claimed = sum(pool.map(claim_shard, index.shards))
        return claimed, time.perf_counter() - started


def _process_main(url: str, namespace: str, count: int, shard: int, ready: Any, go: Any, out: Any) -> None:
    index = DueIndex(_client(url), namespace, count)
    index.shards[shard].fetch_due_counting(0, 1, 0, 0)  # connect and load the scripts before the clock starts
    ready.wait()
    go.wait()
    started = time.perf_counter()
    claimed = claim_shard(index.shards[shard])
    out.put((claimed, started, time.perf_counter()))


def _processes(url: str, index: DueIndex) -> tuple[int, float]:
    ctx = multiprocessing.get_context("spawn")
    ready, go, out = ctx.Barrier(index.count + 1), ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_process_main, args=(url, index.namespace, index.count, n, ready, go, out))
             for n in range(index.count)]
    for proc in procs:
        proc.start()
    ready.wait()
    go.set()
    results = [out.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join()
    first, last = min(r[1] for r in results), max(r[2] for r in results)
    return sum(r[0] for r in results), last - first


def _script_usec(ports: list[int]) -> dict[int, int]:
    """Microseconds each node has spent running scripts (INFO commandstats), since it started."""
    spent = {}
    for port in ports:
        node = redis.Redis(port=port)
        stats = node.info("commandstats")
        node.close()
        spent[port] = sum(int(stats.get(f"cmdstat_{name}", {}).get("usec", 0)) for name in ("evalsha", "eval"))
    return spent


def _round(url: str, client: Any, count: int, jobs: int, mode: str, ports: list[int]) -> dict[str, Any]:
    index = DueIndex(client, f"bench-shards-{uuid.uuid4().hex[:8]}", count)
    _load(client, index, jobs)
    nodes = sorted({client.get_node_from_key(shard.due_key).port for shard in index.shards})
    before = _script_usec(ports)
    claimed, seconds = _threads(index) if mode == "threads" else _processes(url, index)
    after = _script_usec(ports)
    busiest_seconds = max(after[p] - before[p] for p in ports) / 1e6
    pipe = index.pipeline()
    for shard in index.shards:
        for key in shard.keys():
            pipe.delete(key)
    pipe.execute()
    if claimed != jobs:
        raise RuntimeError(f"claimed {claimed} of {jobs} jobs at {count} shards ({mode})")
    return {"claimed": claimed, "seconds": seconds, "per_second": claimed / seconds, "nodes": len(nodes),
            "busiest_node_script_seconds": busiest_seconds, "server_ceiling_per_second": claimed / busiest_seconds}


def run(jobs: int, rounds: int, modes: tuple[str, ...] = ("threads", "processes")) -> dict[str, Any]:
    if not cluster.available():
        raise Unavailable("the shards benchmark needs redis-server and redis-cli (apt-get install redis-server)")
    with cluster.LocalCluster(3) as started:
        client = _client(started.url)
        try:
            raw: dict[str, dict[int, list[dict[str, Any]]]] = {m: {n: [] for n in SHARD_COUNTS} for m in modes}
            for _ in range(rounds):
                for mode in modes:
                    for count in SHARD_COUNTS:
                        raw[mode][count].append(_round(started.url, client, count, jobs, mode, started.ports))
        finally:
            client.close()
    return {"jobs": jobs, "rounds": rounds, "primaries": 3, "results": {
        mode: {count: _summary(rs) for count, rs in by_count.items()} for mode, by_count in raw.items()}}


def _summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    rates = [r["per_second"] for r in rounds]
    ceilings = [r["server_ceiling_per_second"] for r in rounds]
    return {"median_per_second": statistics.median(rates), "best_per_second": max(rates),
            "nodes": rounds[0]["nodes"], "rates": rates, "median_server_ceiling": statistics.median(ceilings)}


def rows(r: dict[str, Any]) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = [
        (f"Sharded claiming: {r['jobs']:,} jobs due at one instant on a Redis Cluster of {r['primaries']} "
         f"primaries, claimed without Postgres; {r['rounds']} interleaved rounds; baseline column: 1 shard, "
         f"same run",)]
    ceilings = r["results"]["threads"]
    one_ceiling = ceilings[1]["median_server_ceiling"]
    for count, s in ceilings.items():
        out.append((f"cache-side ceiling, {count} shard{'s' if count > 1 else ''}: claims / script time of the "
                    f"busiest node (INFO commandstats), median", f"{s['median_server_ceiling']:,.0f}/s",
                    f"{one_ceiling:,.0f}/s", f"{s['median_server_ceiling'] / one_ceiling:.2f}x"))
    for mode, by_count in r["results"].items():
        one = by_count[1]["median_per_second"]
        for count, s in by_count.items():
            how = "one tick, a thread per shard" if mode == "threads" else "a claiming process per shard"
            out.append((f"claims/s, {count} shard{'s' if count > 1 else ''} on {s['nodes']} node(s), {how}: "
                        f"median (best)", f"{s['median_per_second']:,.0f} ({s['best_per_second']:,.0f})",
                        f"{one:,.0f}", f"{s['median_per_second'] / one:.2f}x faster"))
    return out

