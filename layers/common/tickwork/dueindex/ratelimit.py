"""Per-API-key rate limit: a token bucket in Redis, refilled at `rate` tokens a second up to `burst`.

Its key and script live here, beside what they are for (the due index's are in tickwork.dueindex.index). The
caller passes `now`: the API's one clock per request, so tests move it instead of sleeping, and the bucket
never mixes two clocks. Clocks of different API environments may differ a little: a bucket never refills
for a `now` older than the last one it saw, so a late clock cannot mint tokens.

Redis is an index and a cache here, never the truth: when it does not answer, the request is let through
(fail open) and the failure logged.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools import Logger
from redis.exceptions import RedisError

logger = Logger(child=True)

# One hash per key: t = tokens left (a float), ts = when they were counted (epoch ms). It expires once it
# would be full again anyway, so idle keys cost nothing.
BUCKET_KEY = "{{{namespace}}}:rl:{key_id}"
_TAKE = """
local now, rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local state = redis.call('HMGET', KEYS[1], 't', 'ts')
local tokens, ts = tonumber(state[1]), tonumber(state[2])
if tokens == nil or ts == nil then tokens, ts = burst, now end
if now > ts then
  tokens = math.min(burst, tokens + (now - ts) * rate / 1000)
  ts = now
end
local allowed = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
end
redis.call('HSET', KEYS[1], 't', string.format('%.6f', tokens), 'ts', ts)
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) * 1000 / rate) + 1000)
return {allowed, string.format('%.6f', tokens)}
"""


@dataclass(frozen=True)
class Decision:
    allowed: bool
    limit: int  # the burst: most requests a full bucket lets through at once
    remaining: int
    reset_seconds: int  # until the bucket is full again
    retry_after_seconds: int  # until the next request would be allowed; 0 when it is now

    def headers(self) -> dict[str, str]:
        headers = {"RateLimit-Limit": str(self.limit), "RateLimit-Remaining": str(self.remaining),
                   "RateLimit-Reset": str(self.reset_seconds)}
        if not self.allowed:
            headers["Retry-After"] = str(self.retry_after_seconds)
        return headers


class RateLimiter:
    def __init__(self, redis: Any, namespace: str, rate_per_second: int, burst: int) -> None:
        self._redis = redis
        self._namespace = namespace
        self._rate = rate_per_second
        self._burst = max(burst, 1)
        self._take = redis.register_script(_TAKE)

    @property
    def enabled(self) -> bool:
        return self._rate > 0

    def take(self, key_id: str, now_ms: int) -> Decision | None:
        """Spend one token of `key_id`'s bucket; None when the limit is off or Redis does not answer."""
        if not self.enabled:
            return None
        key = BUCKET_KEY.format(namespace=self._namespace, key_id=key_id)
        try:
            allowed, tokens = self._take(keys=[key], args=[now_ms, self._rate, self._burst])
        except RedisError as exc:
            # The key id, not the key: it names the bucket and is no secret.
            logger.warning("rate limiter unavailable: request allowed",
                           extra={"key_id": key_id, "error_type": type(exc).__name__})
            return None
        return decide(bool(int(allowed)), float(tokens), self._rate, self._burst)


def decide(allowed: bool, tokens: float, rate: int, burst: int) -> Decision:
    """The headers' figures for a bucket left with `tokens` after this request."""
    return Decision(
        allowed=allowed, limit=burst, remaining=max(int(math.floor(tokens)), 0),
        reset_seconds=math.ceil(max(burst - tokens, 0) / rate),
        retry_after_seconds=0 if allowed else max(math.ceil((1 - tokens) / rate), 1),
    )
