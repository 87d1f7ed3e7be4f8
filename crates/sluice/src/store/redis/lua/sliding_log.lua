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

local SL_REBASE = 2251799813685248

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
  if start + units > SL_REBASE then
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

