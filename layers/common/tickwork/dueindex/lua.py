"""The Lua scripts of the due index, each one atomic on its shard (or on the base tag, for the locks).

Every Redis key Tickwork uses is named in this package: a shard's keys in tickwork.dueindex.shard, the
keys the shards share in tickwork.dueindex.index, the API's rate limit in tickwork.dueindex.ratelimit.
"""
from __future__ import annotations

# Up to ARGV[2] members scored from ARGV[5] to ARGV[1] (ZRANGEBYSCORE bounds: '-inf', '(' for exclusive),
# past the first ARGV[6] of them. The first element says whether the index marker exists: when it is gone
# (FLUSHALL, a failover to an empty replica) the index must be rebuilt from Postgres before anything is
# claimed; the second how many members score below ARGV[5] (the backlog behind an on-time fetch). Then how
# many members are due in each of ARGV[4] whole seconds from ARGV[3] (ms) on, for the adaptive lookahead.
FETCH_DUE = """
local items = redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[5], ARGV[1], 'WITHSCORES', 'LIMIT', ARGV[6], ARGV[2])
local out = {redis.call('EXISTS', KEYS[3]), 0}
if ARGV[5] ~= '-inf' then out[2] = redis.call('ZCOUNT', KEYS[1], '-inf', '(' .. ARGV[5]) end
for i = 0, tonumber(ARGV[4]) - 1 do
  local start = tonumber(ARGV[3]) + i * 1000
  out[#out + 1] = redis.call('ZCOUNT', KEYS[1], start, start + 999)
end
for i = 1, #items, 2 do
  local member = items[i]
  local spec = false
  if string.sub(member, 1, 2) == 'j:' then spec = redis.call('HGET', KEYS[2], string.sub(member, 3)) end
  out[#out + 1] = member
  out[#out + 1] = items[i + 1]
  out[#out + 1] = spec
end
return out
"""

# ARGV holds (member, expected score, new score or '' to remove) triples. A member whose score is not
# the one this poller read was claimed or rescheduled by someone else, and is left alone. A member claimed
# is handled: its count of failures in a row (KEYS[3], see QUARANTINE) goes; while no member of the shard is in
# quarantine that hash does not exist, and one EXISTS per call is all this costs.
CLAIM = """
local won = {}
local counted = redis.call('EXISTS', KEYS[3]) == 1
for i = 1, #ARGV, 3 do
  local member = ARGV[i]
  local current = redis.call('ZSCORE', KEYS[1], member)
  if current and tonumber(current) == tonumber(ARGV[i + 1]) then
    if ARGV[i + 2] == '' then
      redis.call('ZREM', KEYS[1], member)
      if string.sub(member, 1, 2) == 'j:' then redis.call('HDEL', KEYS[2], string.sub(member, 3)) end
    else
      redis.call('ZADD', KEYS[1], ARGV[i + 2], member)
    end
    if counted then redis.call('HDEL', KEYS[3], member) end
    won[#won + 1] = 1
  else
    won[#won + 1] = 0
  end
end
return won
"""

# Quarantine members whose handling raised (tickwork.dispatch.quarantine): each moves out of the claimable range
# to now + the backoff of its failures in a row, with the compare-and-set CLAIM uses. KEYS: due set, the hash
# of failures in a row. ARGV: now (ms), the number of backoff steps, the steps (ms; the last serves every count
# past it), then (member, expected score or '' for a member claimed away, failures or '' to count them here)
# triples. A member away is put back only if still away (NX); one no longer at its expected score was claimed
# or rescheduled by someone else and is left alone. Returns (failures, retry ms, moved 1/0) per member.
QUARANTINE = """
local now, steps = tonumber(ARGV[1]), tonumber(ARGV[2])
local out = {}
for i = 3 + steps, #ARGV, 3 do
  local member, expected, failures = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  if not failures then failures = redis.call('HINCRBY', KEYS[2], member, 1) end
  local retry = now + tonumber(ARGV[2 + math.min(failures, steps)])
  local moved = 0
  if expected == '' then
    moved = redis.call('ZADD', KEYS[1], 'NX', retry, member)
  else
    local current = redis.call('ZSCORE', KEYS[1], member)
    if current and tonumber(current) == tonumber(expected) then
      redis.call('ZADD', KEYS[1], retry, member)
      moved = 1
    end
  end
  out[#out + 1] = failures
  out[#out + 1] = retry
  out[#out + 1] = moved
end
return out
"""

# One page of a rebuild, applied only if the rebuild key still holds the position the page was read at:
# otherwise another rebuilder went on meanwhile, or Redis lost the key and the rebuild starts over.
# KEYS: due set, specs, rebuild key, marker. ARGV: position read, position after the page ('' when the
# rebuild is complete: the marker is set instead), built-at time, then as JSON arrays the job ids, their
# scores (strings: exact), the 1-based number of each one's spec among the distinct specs, and the ids
# of jobs to take out; then the distinct encoded specs. Few arguments and one variadic command per kind
# of write: per-argument and per-call costs are what a page of thousands of jobs pays.
# A job already in the set keeps its score (a claim made since Postgres was read) and a spec already
# there is kept (the API wrote it after this page was read); only a job added here gets this spec.
REBUILD_PAGE = """
if redis.call('GET', KEYS[3]) ~= ARGV[1] then return -1 end
local ids, scores, spec_of = cjson.decode(ARGV[4]), cjson.decode(ARGV[5]), cjson.decode(ARGV[6])
local function chunked(command, key, args)
  for i = 1, #args, 4000 do redis.call(command, key, unpack(args, i, math.min(i + 3999, #args))) end
end
local members, new_scores, new_specs = {}, {}, {}
for i = 1, #ids do members[i] = 'j:' .. ids[i] end
for first = 1, #members, 4000 do
  local indexed = redis.call('ZMSCORE', KEYS[1], unpack(members, first, math.min(first + 3999, #members)))
  for k = 1, #indexed do
    local i = first + k - 1
    if indexed[k] then
      redis.call('HSETNX', KEYS[2], ids[i], ARGV[7 + spec_of[i]])
    else
      new_scores[#new_scores + 1] = scores[i]
      new_scores[#new_scores + 1] = members[i]
      new_specs[#new_specs + 1] = ids[i]
      new_specs[#new_specs + 1] = ARGV[7 + spec_of[i]]
    end
  end
end
chunked('ZADD', KEYS[1], new_scores)
chunked('HSET', KEYS[2], new_specs)
for _, id in ipairs(cjson.decode(ARGV[7])) do
  redis.call('ZREM', KEYS[1], 'j:' .. id)
  redis.call('HDEL', KEYS[2], id)
end
if ARGV[2] == '' then
  redis.call('SET', KEYS[4], ARGV[3])
  redis.call('DEL', KEYS[3])
else
  redis.call('SET', KEYS[3], ARGV[2])
end
return #new_specs / 2
"""

# Index jobs, each with its score unless already in the set, and its spec only if the one indexed is
# still the one the caller compared with ('' for none): never over a spec the API wrote meanwhile.
# ARGV: (job id, score, encoded spec, spec seen) per job. Returns how many specs were written.
PUT_IF_UNCHANGED = """
local written = 0
for i = 1, #ARGV, 4 do
  redis.call('ZADD', KEYS[1], 'NX', ARGV[i + 1], 'j:' .. ARGV[i])
  if (redis.call('HGET', KEYS[2], ARGV[i]) or '') == ARGV[i + 3] then
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 2])
    written = written + 1
  end
end
return written
"""

# Take jobs out (member and spec); returns the ids whose member was in the set.
TAKE_OUT = """
local removed = {}
for i = 1, #ARGV do
  if redis.call('ZREM', KEYS[1], 'j:' .. ARGV[i]) == 1 then removed[#removed + 1] = ARGV[i] end
  redis.call('HDEL', KEYS[2], ARGV[i])
end
return removed
"""

RELEASE_LOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

# Note that a poller is ticking (KEYS[2], read by GET /health) and read the stored shard count (KEYS[3]); then
# take the tick lock (KEYS[1]) unless this second was already ticked (KEYS[4], when given): two tick loops
# side by side, or a duplicate execution, wake for the same second, and only the first of them works. The
# second is marked only by the poller that took the lock, so a tick kept out by another one still running
# leaves the second to a later arrival. Returns {1 if locked else 0, the shard count or false}.
ACQUIRE_TICK = """
redis.call('SET', KEYS[2], ARGV[3])
local layout = redis.call('GET', KEYS[3])
if KEYS[4] and redis.call('EXISTS', KEYS[4]) == 1 then return {0, layout} end
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return {0, layout} end
if KEYS[4] then redis.call('SET', KEYS[4], ARGV[1], 'PX', ARGV[4]) end
return {1, layout}
"""

# Take places among each tenant's runs in flight (KEYS: one sorted set per tenant, member `<run>:<attempt>`
# scored by when its place lapses). ARGV: now (ms), then per key its budget, how many members follow, and
# (member, lapse ms, ahead) triples. Places that lapsed are dropped first, so a place whose executor died is free
# again at its lapse. A member already holding a place keeps it (a repeated dispatch of the same attempt).
# A member handed over ahead of its instant (ahead '1': its lapse is its instant plus the deployment's lapse
# span) is taken while the places of other instants (other scores) are fewer than the budget: the runs of one
# instant never hold each other back, so a tenant holds at most its budget less one plus one instant's runs.
# Any other member (its instant passed: a retry, a run held back, a manual run) is taken while all places are.
# The set itself expires with its last place (a TTL relative to ARGV's now: the callers' clock, not Redis's).
# Returns 1 or 0 per member (taken or refused), then per key how many places are held afterwards.
TAKE_PLACES = """
local now, a, taken, held = tonumber(ARGV[1]), 2, {}, {}
for k = 1, #KEYS do
  local budget, n = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  a = a + 2
  redis.call('ZREMRANGEBYSCORE', KEYS[k], '-inf', now)
  local count, alike = redis.call('ZCARD', KEYS[k]), {}  -- alike: places held by score, counted when asked
  for i = 1, n do
    local member, lapse, ahead = ARGV[a], ARGV[a + 1], ARGV[a + 2] == '1'
    local class = tonumber(lapse)
    a = a + 3
    local holds = redis.call('ZSCORE', KEYS[k], member)
    local others = count
    if ahead then
      if not alike[class] then alike[class] = redis.call('ZCOUNT', KEYS[k], lapse, lapse) end
      others = count - alike[class]
    end
    if holds or others < budget then
      if holds then alike[tonumber(holds)] = nil else count = count + 1 end
      redis.call('ZADD', KEYS[k], lapse, member)
      if alike[class] then alike[class] = alike[class] + 1 end
      taken[#taken + 1] = 1
    else
      taken[#taken + 1] = 0
    end
  end
  local last = redis.call('ZRANGE', KEYS[k], -1, -1, 'WITHSCORES')
  if last[2] then redis.call('PEXPIRE', KEYS[k], math.max(1, tonumber(last[2]) - now)) end
  held[#held + 1] = count
end
for k = 1, #held do taken[#taken + 1] = held[k] end
return taken
"""
