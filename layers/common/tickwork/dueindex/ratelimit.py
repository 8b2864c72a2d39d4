"""Rate limits: token buckets in Redis, each refilled at `rate` tokens a second up to `burst`: one per API key,
and one per tenant that all its keys share (so many keys do not multiply a tenant's budget).

Their keys and script live here, beside what they are for (the due index's are in tickwork.dueindex.index).
A request takes a token from each of its buckets in one script, or from none: a request one bucket refuses
spends nothing from the others. The caller passes `now`: the API's one clock per request, so tests move it
instead of sleeping, and a bucket never mixes two clocks. Clocks of different API environments may differ a
little: a bucket never refills for a `now` older than the last one it saw, so a late clock cannot mint tokens.

Redis is an index and a cache here, never the truth: when it does not answer, the request is let through
(fail open) and the failure logged.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from aws_lambda_powertools import Logger
from redis.exceptions import RedisError

logger = Logger(child=True)

# One hash per bucket: t = tokens left (a float), ts = when they were counted (epoch ms). It expires once it
# would be full again anyway, so idle buckets cost nothing. Every bucket has the namespace's hash tag: one
# script may touch a key's and its tenant's bucket on a cluster.
BUCKET_KEY = "{{{namespace}}}:rl:{key_id}"
TENANT_BUCKET_KEY = "{{{namespace}}}:rl:tenant:{tenant_id}"
# KEYS: the buckets; ARGV: now, then rate and burst of each bucket. Returns {allowed, tokens left of each}.
_TAKE = """
local now = tonumber(ARGV[1])
local allowed, counted = 1, {}
for i, key in ipairs(KEYS) do
  local rate, burst = tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1])
  local state = redis.call('HMGET', key, 't', 'ts')
  local tokens, ts = tonumber(state[1]), tonumber(state[2])
  if tokens == nil or ts == nil then tokens, ts = burst, now end
  if now > ts then
    tokens = math.min(burst, tokens + (now - ts) * rate / 1000)
    ts = now
  end
  if tokens < 1 then allowed = 0 end
  counted[i] = {tokens, ts}
end
local result = {allowed}
for i, key in ipairs(KEYS) do
  local rate, burst = tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1])
  local tokens, ts = counted[i][1] - allowed, counted[i][2]
  redis.call('HSET', key, 't', string.format('%.6f', tokens), 'ts', ts)
  redis.call('PEXPIRE', key, math.ceil((burst - tokens) * 1000 / rate) + 1000)
  result[i + 1] = string.format('%.6f', tokens)
end
return result
"""


@dataclass(frozen=True)
class Bucket:
    """One budget a request spends from: `scope` says whose ("key" or "tenant") for the caller's message."""

    key: str
    rate: int  # tokens a second; 0: no limit
    burst: int
    scope: str = "key"


def key_bucket(namespace: str, key_id: str, rate: int, burst: int) -> Bucket:
    return Bucket(BUCKET_KEY.format(namespace=namespace, key_id=key_id), rate, max(burst, 1))


def tenant_bucket(namespace: str, tenant_id: str, rate: int, burst: int) -> Bucket:
    return Bucket(TENANT_BUCKET_KEY.format(namespace=namespace, tenant_id=tenant_id), rate, max(burst, 1), "tenant")


@dataclass(frozen=True)
class Decision:
    allowed: bool
    limit: int  # the burst: most requests a full bucket lets through at once
    remaining: int
    reset_seconds: int  # until the bucket is full again
    retry_after_seconds: int  # until the next request would be allowed; 0 when it is now
    scope: str = "key"  # whose bucket the figures are: the one that refused, else the one with least left

    def headers(self) -> dict[str, str]:
        headers = {"RateLimit-Limit": str(self.limit), "RateLimit-Remaining": str(self.remaining),
                   "RateLimit-Reset": str(self.reset_seconds)}
        if not self.allowed:
            headers["Retry-After"] = str(self.retry_after_seconds)
        return headers


class RateLimiter:
    def __init__(self, redis: Any) -> None:
        self._take = redis.register_script(_TAKE)

    def take(self, buckets: Sequence[Bucket], now_ms: int, ids: Mapping[str, str]) -> Decision | None:
        """Spend one token of every bucket, or none if one has none left; None when no bucket has a limit or
        Redis does not answer. `ids` name the caller in the log (ids only, never a key)."""
        limited = [b for b in buckets if b.rate > 0]
        if not limited:
            return None
        args: list[int] = [now_ms]
        for bucket in limited:
            args += [bucket.rate, bucket.burst]
        try:
            allowed, *tokens = self._take(keys=[b.key for b in limited], args=args)
        except RedisError as exc:
            logger.warning("rate limiter unavailable: request allowed", extra={**ids, "error_type": type(exc).__name__})
            return None
        decisions = [decide(bool(int(allowed)), float(left), b.rate, b.burst, b.scope)
                     for b, left in zip(limited, tokens)]
        return binding(decisions)


def binding(decisions: Sequence[Decision]) -> Decision:
    """The decision whose figures to show: the refusal with the longest wait, else the fewest tokens left."""
    return max(decisions, key=lambda d: (d.retry_after_seconds, -d.remaining))


def decide(allowed: bool, tokens: float, rate: int, burst: int, scope: str = "key") -> Decision:
    """The headers' figures for a bucket left with `tokens` after this request."""
    return Decision(
        allowed=allowed, limit=burst, remaining=max(int(math.floor(tokens)), 0),
        reset_seconds=math.ceil(max(burst - tokens, 0) / rate),
        retry_after_seconds=0 if allowed or tokens >= 1 else max(math.ceil((1 - tokens) / rate), 1),
        scope=scope,
    )
