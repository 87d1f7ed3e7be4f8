-- sliding_log: the algorithm's one Lua source. Its sections (general, one, many, give_back) are the
-- forms the Redis store generates its scripts from (store/redis/source.rs).

--@@general
-- sliding_log: restates algorithm/sliding_log.rs as look and record; O(log n) commands per
-- request whatever its cost (n: requests in the window).
--
-- KEY: a ZSET with one member per recorded request, score = its time (µs), member "<start>:<units>"
-- where `start` (16 digits, zero-padded: requests of one microsecond sort in their order) is the
-- number of units recorded on the key before it. Starts grow with time, so units in the window =
-- end of the newest - start of the oldest in the window, and the k-th oldest unit is found by a
-- binary search over ranks. Starts are rebased to 0 past 2^51 (far apart in practice: the log
-- holds few requests whenever they are large). A request's time is never before
-- the newest one's (a clock stepping back keeps the order). Beyond `limit` units only the newest
-- `limit` matter (see sliding_log::record), so older requests are dropped then. The key expires
-- when its newest request leaves the window.


local function sliding_log_member(member)
  local s, c = string.match(member, '^(%d+):(%d+)$')
  return tonumber(s), tonumber(c)
end

local function sliding_log_entry(key, rank)
  local e = redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')
  local s, c = sliding_log_member(e[1])
  return s, c, tonumber(e[2])
end

local function sliding_log_look(key, now, p, cost)
  local horizon = now - p.window
  local o = { delay = 0, count = 0, first = 0, reset = 0 }
  local first = redis.pcall('ZRANGE', key, 0, 0, 'WITHSCORES')
  if first.err then
    local until_us = marker_of(key)
    if until_us then
      return nil, until_us
    end
    o.foreign = true
    first = {}
  end
  if first[1] then
    if tonumber(first[2]) <= horizon then
      -- Some requests left the window: count from the oldest one still in it.
      o.expired = true
      first = redis.call('ZRANGEBYSCORE', key, '(' .. int(horizon), '+inf', 'WITHSCORES',
        'LIMIT', 0, 1)
    end
  end
  if first[1] and not sliding_log_member(first[1]) then
    -- Another algorithm's sorted set (a concurrency limit's leases): no state.
    o.foreign = true
    first = {}
  end
  if first[1] then
    o.base = sliding_log_member(first[1])
    local s, c, t = sliding_log_entry(key, -1)
    o.newest_t = t
    o.stop = s + c
    o.count = o.stop - o.base
    o.reset = t + p.window - now
  end
  o.allowed = o.count + cost <= p.count
  if not o.allowed then
    -- The request fits once `need` of the oldest units have left the window.
    local need = o.count + cost - p.count
    o.retry = p.window
    if need <= o.count then
      local lo = 0
      if o.expired then
        lo = redis.call('ZCOUNT', key, '-inf', int(horizon))
      end
      -- Every request holds at least one unit: the one holding the need-th unit is at most
      -- need - 1 ranks in; with unit costs it is exactly there.
      local hi = math.min(lo + need - 1, redis.call('ZCARD', key) - 1)
      local reached = function(rank)
        local s, c, t = sliding_log_entry(key, rank)
        return s + c - o.base >= need, t
      end
      if hi > lo and not reached(hi - 1) then
        lo = hi
      end
      while lo < hi do
        local mid = math.floor((lo + hi) / 2)
        if reached(mid) then
          hi = mid
        else
          lo = mid + 1
        end
      end
      local _, t = reached(lo)
      o.retry = t + p.window - now
    end
  end
  o.remaining = math.max(p.count - o.count, 0)
  return o
end

local function sliding_log_record(key, now, p, cost, o)
  if o.foreign then
    redis.call('DEL', key)
  end
  if o.expired then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now - p.window))
  end
  local start = o.stop or 0
  local base = o.base or 0
  local units = math.min(cost, p.count)
  local t = now
  if o.newest_t and o.newest_t > t then
    t = o.newest_t
  end
  if start + units > SLIDING_LOG_REBASE then
    local flat = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
    redis.call('DEL', key)
    for i = 1, #flat, 2 do
      local s, c = sliding_log_member(flat[i])
      redis.call('ZADD', key, flat[i + 1], string.format('%016d:%d', s - base, c))
    end
    start = start - base
    base = 0
  end
  redis.call('ZADD', key, int(t), string.format('%016d:%d', start, units))
  local stop = start + units
  -- Keep only the requests that hold the newest `limit` units.
  while stop - base > p.count do
    local s, c = sliding_log_entry(key, 0)
    if stop - (s + c) < p.count then
      break
    end
    redis.call('ZREMRANGEBYRANK', key, 0, 0)
    base = s + c
  end
  o.count = stop - base
  o.remaining = math.max(p.count - o.count, 0)
  o.reset = t + p.window - now
  keep(key, o.reset)
end


--@@one
-- sliding_log#one: one sliding-log limit (see one_head.lua for a block or penalty), admitting with
-- the least Redis work (TIME, the oldest and newest members, ZADD, PEXPIRE; ZREMRANGEBYSCORE only
-- when requests left the window). Restates sliding_log_look and sliding_log_record
-- (sliding_log.lua, algorithm/sliding_log.rs) for a request that fits, after one_head.lua, without
-- the prelude: every function a script defines costs Redis time on every call. A denial (its retry
-- time needs a search), a key holding anything but the log (another algorithm's sorted set too), or
-- a log due for rebasing returns {} having written nothing, and the caller decides with the general
-- script instead.
--
-- KEYS[1]: the state key, a ZSET (see sliding_log.lua).
-- ARGV, the limit's constants (and the violations key): as one_head.lua says.
-- Returns: as one_head.lua says (always allowed).

local key = KEYS[1]
local first = redis.pcall('ZRANGE', key, '0', '0', 'WITHSCORES')
if first.err then
  if guarded then
    local held = redis.pcall('GET', key)
    return from_marker(held)
  end
  return {}
end
local horizon = now - window
local expired = false
if first[1] and tonumber(first[2]) <= horizon then
  expired = true
  first = redis.call('ZRANGEBYSCORE', key, '(' .. string.format('%d', horizon), '+inf',
    'WITHSCORES', 'LIMIT', 0, 1)
end
local base, start, t = 0, 0, now
if first[1] then
  -- A member is "<start, 16 digits>:<units>" (see sliding_log.lua): cut, not matched.
  local oldest = first[1]
  base = string.byte(oldest, 17) == 58 and tonumber(string.sub(oldest, 1, 16))
  if not base then
    return {}
  end
  local newest = redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')
  start = tonumber(string.sub(newest[1], 1, 16)) + tonumber(string.sub(newest[1], 18))
  t = math.max(now, tonumber(newest[2]))
end
local count = start - base
if count + cost > limit or start + cost > SLIDING_LOG_REBASE then
  return {}
end
if expired then
  redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', horizon))
end
redis.call('ZADD', key, string.format('%d', t), string.format('%016d:%d', start, cost))
local reset = t + window - now
redis.call(pexpire, key,
  string.format('%d', math.ceil((expiry_from + math.max(reset, min_ttl)) / 1000)))
return { now, 1, limit - count - cost, reset, -1, violations, warning }

--@@many
-- sliding_log#many: a sliding-log limit's part of a rule script (see many_head.lua):
-- sliding_log.lua#one, split into its look (the oldest and newest members) and its record
-- (ZADD, PEXPIRE; ZREMRANGEBYSCORE only when requests left the window). A denial (its retry time
-- needs a search) or a log due for rebasing returns {}, as there.

local first_@ = redis.pcall('ZRANGE', key_@, '0', '0', 'WITHSCORES')
if first_@.err then
  return {}
end
local horizon_@ = now - window_@
local expired_@ = false
if first_@[1] and tonumber(first_@[2]) <= horizon_@ then
  expired_@ = true
  first_@ = redis.call('ZRANGEBYSCORE', key_@, '(' .. string.format('%d', horizon_@), '+inf',
    'WITHSCORES', 'LIMIT', '0', '1')
end
local base_@, start_@, t_@, reset_@ = 0, 0, now, 0
if first_@[1] then
  local oldest = first_@[1]
  base_@ = string.byte(oldest, 17) == 58 and tonumber(string.sub(oldest, 1, 16))
  if not base_@ then
    return {}
  end
  local newest = redis.call('ZRANGE', key_@, '-1', '-1', 'WITHSCORES')
  start_@ = tonumber(string.sub(newest[1], 1, 16)) + tonumber(string.sub(newest[1], 18))
  reset_@ = tonumber(newest[2]) + window_@ - now
  t_@ = math.max(now, tonumber(newest[2]))
end
if start_@ - base_@ + cost_@ > limit_@ or start_@ + cost_@ > SLIDING_LOG_REBASE then
  return {}
end
local allowed_@, retry_@ = true, -1
local remaining_@ = math.max(limit_@ - start_@ + base_@, 0)
--@record
if expired_@ then
  redis.call('ZREMRANGEBYSCORE', key_@, '-inf', string.format('%d', horizon_@))
end
redis.call('ZADD', key_@, string.format('%d', t_@), string.format('%016d:%d', start_@, cost_@))
remaining_@ = limit_@ - start_@ + base_@ - cost_@
reset_@ = t_@ + window_@ - now
redis.call(pexpire, key_@,
  string.format('%d', math.ceil((expiry_from + math.max(reset_@, min_ttl)) / 1000)))

--@@give_back
-- sliding_log#give_back: gives back one cross-slot admission's units (see lua/give_back.lua).
local function sliding_log_give_back(key, kind, p, cost)
  if kind ~= 'zset' then
    return
  end
  local units = int(math.min(cost, p.count))
  local recorded = redis.call('ZRANGEBYSCORE', key, int(t0), '+inf')
  for j = #recorded, 1, -1 do
    if string.match(recorded[j], ':(%d+)$') == units then
      redis.call('ZREM', key, recorded[j])
      if redis.call('ZCARD', key) == 0 then
        redis.call('DEL', key)
      end
      changed = changed + 1
      return
    end
  end
end
