"""Which shard of the due index holds what: pure functions of the namespace, the shard count and an id.

A shard is one hash tag: its due set, specs, marker and rebuild position live on one cluster slot, so
its Lua scripts stay atomic on a cluster-mode cache. A job belongs to the shard its id hashes to; a
one-shot dispatch to the one its execution id hashes to. One shard keeps today's single tag, `{ns}`,
so a deployment that never sets DUE_INDEX_SHARDS keeps its keys. With N > 1 each shard's tag is picked
in its own N-th of the 16,384 cluster slots, so on a cluster whose slots are split evenly between N
primaries (what `redis-cli --cluster create` and managed caches do) every shard lands on its own
primary. The shard count is part of each tag: two layouts never share a key, so a change of N
rebuilds the new layout beside the old one (tickwork.dueindex.relayout) instead of mixing them.
"""
from __future__ import annotations

import binascii
import functools
import zlib

from tickwork.errors import ConfigurationError

CLUSTER_SLOTS = 16384
MAX_SHARDS = 64
# Suffixes tried per shard to land its tag in its slot range: a range of 16384 / 64 = 256 slots is hit
# by a random tag with probability 1/64, so 4,096 tries fail with probability (63/64)^4096 ≈ 1e-28.
MAX_TAG_TRIES = 4096


def base_tag(namespace: str) -> str:
    """The tag of the keys every layout shares (the locks, the stored shard count), and of shard 0 of 1."""
    return "{" + namespace + "}"


def cluster_slot(tag: str) -> int:
    """The cluster slot of keys with this hash tag (`{...}` included): CRC16/XMODEM of what is inside."""
    return binascii.crc_hqx(tag[1:-1].encode(), 0) % CLUSTER_SLOTS


def shard_tags(namespace: str, count: int) -> list[str]:
    """The hash tag of each of `count` shards, in shard order."""
    return list(_tags(namespace, check_count(count)))


@functools.lru_cache(maxsize=64)
def _tags(namespace: str, count: int) -> tuple[str, ...]:
    if count == 1:
        return (base_tag(namespace),)
    return tuple(_tag_in_range(namespace, count, shard) for shard in range(count))


def _tag_in_range(namespace: str, count: int, shard: int) -> str:
    low, high = shard * CLUSTER_SLOTS // count, (shard + 1) * CLUSTER_SLOTS // count
    for k in range(MAX_TAG_TRIES):
        tag = "{" + f"{namespace}/{count}.{shard}.{k}" + "}"
        if low <= cluster_slot(tag) < high:
            return tag
    raise ConfigurationError(f"no hash tag found for shard {shard} of {count}")  # pragma: no cover


def check_count(count: int) -> int:
    if not 1 <= count <= MAX_SHARDS:
        raise ConfigurationError(f"DUE_INDEX_SHARDS must be between 1 and {MAX_SHARDS}, got {count}")
    return count


def shard_of(entity_id: str, count: int) -> int:
    """The shard of a job (by job id) or of a one-shot dispatch (by execution id)."""
    return 0 if count == 1 else zlib.crc32(entity_id.encode()) % count


def member_shard(member: str, count: int) -> int:
    """The shard of a due-set member: `j:<job id>`, `e:<execution id>:<attempt>` or
    `n:<notification id>:<attempt>` or `c:<execution id>:<attempt>` (a one-shot dispatch goes by its id)."""
    if count == 1:
        return 0
    kind, _, rest = member.partition(":")
    return shard_of(rest.rsplit(":", 1)[0] if kind in ("e", "n", "c") else rest, count)
