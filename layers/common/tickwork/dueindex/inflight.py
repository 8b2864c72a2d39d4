"""Each tenant's runs in flight: a sorted set of the attempts dispatched and not yet ended, each scored by when
its place lapses (its latest possible end), under the base tag so one script takes places for a whole batch.
A place's score is its instant (or its hand-off, if later) plus the deployment's lapse span, so the runs of
one instant share a score: the script lets them in together, counting only the places of other instants
(tickwork.dueindex.lua.TAKE_PLACES). What a member and its score mean is what they meant to the release
before: its poller counts every place, and every release's executors give places back by member.

It is an index like the due set, never the truth: a place whose executor died lapses on its own, and a lost
set only lets a tenant run over its budget until the attempts it forgot end (at most their lapse).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from tickwork.dueindex import lua
from tickwork.dueindex.shards import base_tag
from tickwork.models import Dispatch


@dataclass(frozen=True)
class Seat:
    """A place asked for: this dispatch among its tenant's runs in flight, until `lapse_ms` at the latest."""

    dispatch: Dispatch
    tenant_id: str
    budget: int
    lapse_ms: int


def member(dispatch: Dispatch) -> str:
    return f"{dispatch.execution_id}:{dispatch.attempt}"


class InFlight:
    def __init__(self, redis: Any, namespace: str) -> None:
        self.redis = redis
        self._prefix = f"{base_tag(namespace)}:inflight:"
        self._take = redis.register_script(lua.TAKE_PLACES)

    def key(self, tenant_id: str) -> str:
        return self._prefix + tenant_id

    def take(self, seats: Sequence[Seat], now_ms: int) -> tuple[list[bool], dict[str, int]]:
        """Take what places each tenant has left, in order, in one round trip; returns whether each seat got
        one, and how many places each tenant holds afterwards. A seat handed over ahead of its instant (after
        `now_ms`) counts the places of other instants only; any other counts them all."""
        by_tenant: dict[str, list[int]] = {}
        for i, seat in enumerate(seats):
            by_tenant.setdefault(seat.tenant_id, []).append(i)
        if not by_tenant:
            return [], {}
        args: list[Any] = [now_ms]
        for positions in by_tenant.values():
            args += [seats[positions[0]].budget, len(positions)]
            for i in positions:
                ahead = seats[i].dispatch.fire_at_ms > now_ms
                args += [member(seats[i].dispatch), seats[i].lapse_ms, 1 if ahead else 0]
        flat = self._take(keys=[self.key(tenant) for tenant in by_tenant], args=args)
        taken = [False] * len(seats)
        for i, got in zip((i for positions in by_tenant.values() for i in positions), flat):
            taken[i] = bool(got)
        return taken, dict(zip(by_tenant, (int(n) for n in flat[len(seats):])))

    def release(self, dispatches: Sequence[Dispatch]) -> None:
        """Give back the places these dispatches hold (those with a tenant), in one round trip."""
        held = [d for d in dispatches if d.tenant_id]
        if not held:
            return
        by_tenant: dict[str, list[str]] = {}
        for d in held:
            by_tenant.setdefault(d.tenant_id, []).append(member(d))
        pipe = self.redis.pipeline(transaction=False)
        for tenant_id, members in by_tenant.items():
            pipe.zrem(self.key(tenant_id), *members)  # one command per tenant, not one per run
        pipe.execute()
