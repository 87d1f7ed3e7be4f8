-- concurrency: the algorithm's one Lua source. Its sections (general) are the forms the Redis store
-- generates its scripts from (store/redis/source.rs).

--@@general
-- concurrency: restates algorithm/concurrency.rs as look and record; O(log n) commands per
-- request (n: leases held), whatever its cost.
--
-- KEY: a ZSET of the leases, member = the lease's token (22 characters), score = its end (µs).
-- A lease of more than one unit has a second member, 'u' .. token, scored -units, and the key
-- holds '#' scored -(the sum of units - 1 over such leases): units held = leases in force + that
-- sum. Negative scores sit below every end, so ranges over (0, now] (the expired leases) and
-- (now, +inf) (those in force) see the tokens only. Leases of one unit (the common case) add no
-- member. Expired leases are removed by the next request that records one; the key expires when
-- its last lease ends. The lease's token comes from the driver (p.lease; '' takes an anonymous
-- lease under the zero token, which only expiry ends). Taking a lease under a token that holds
-- one adds the units to it and moves its end, as the Rust code does. lua/lease.lua releases and
-- renews.

local CC_ANONYMOUS = 'AAAAAAAAAAAAAAAAAAAAAA'

-- Units of the lease held under `token` (a member of the key).
local function concurrency_units(key, token)
  local u = tonumber(redis.call('ZSCORE', key, 'u' .. token))
  if u then
    return -u
  end
  return 1
end

-- Returns the outcome, or nil and the block's end when the key holds a block marker.
local function concurrency_look(key, now, p, cost)
  local o = { delay = 0, extra = 0, dropped = 0, dropped_extra = 0 }
  local live = redis.pcall('ZCOUNT', key, '(' .. int(now), '+inf')
  if type(live) ~= 'number' then
    local until_us = marker_of(key)
    if until_us then
      return nil, until_us
    end
    o.foreign = true
    live = 0
  end
  if not o.foreign then
    o.extra = -(tonumber(redis.call('ZSCORE', key, '#')) or 0)
    o.dropped = redis.call('ZCOUNT', key, '(0', int(now))
    if o.dropped > 0 and o.extra > 0 then
      for _, token in ipairs(redis.call('ZRANGEBYSCORE', key, '(0', int(now))) do
        o.dropped_extra = o.dropped_extra + concurrency_units(key, token) - 1
      end
    end
  end
  o.held = live + o.extra - o.dropped_extra
  o.allowed = o.held + cost <= p.capacity
  if not o.allowed then
    -- The request fits once leases holding `need` units have expired, earliest first.
    local need = o.held + cost - p.capacity
    o.retry = p.window
    if need <= o.held then
      if o.extra == o.dropped_extra then
        -- Every lease in force holds one unit: the need-th to end.
        local e = redis.call('ZRANGEBYSCORE', key, '(' .. int(now), '+inf', 'WITHSCORES',
          'LIMIT', need - 1, 1)
        o.retry = tonumber(e[2]) - now
      else
        local freed = 0
        local leases = redis.call('ZRANGEBYSCORE', key, '(' .. int(now), '+inf', 'WITHSCORES')
        for i = 1, #leases, 2 do
          freed = freed + concurrency_units(key, leases[i])
          if freed >= need then
            o.retry = tonumber(leases[i + 1]) - now
            break
          end
        end
      end
    end
  end
  o.reset = 0
  if live > 0 then
    local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    o.reset = tonumber(last[2]) - now
  end
  o.remaining = math.max(p.capacity - o.held, 0)
  return o
end

-- Takes the lease of an admitted request.
local function concurrency_record(key, now, p, cost, o)
  if not o.allowed then
    return
  end
  if o.foreign then
    redis.call('DEL', key)
  end
  if o.dropped > 0 then
    if o.extra > 0 then
      for _, token in ipairs(redis.call('ZRANGEBYSCORE', key, '(0', int(now))) do
        redis.call('ZREM', key, 'u' .. token)
      end
    end
    redis.call('ZREMRANGEBYSCORE', key, '(0', int(now))
  end
  local token = p.lease
  if token == nil or token == '' then
    token = CC_ANONYMOUS
  end
  local before = 0
  if redis.call('ZSCORE', key, token) then
    before = concurrency_units(key, token)
  end
  local units = before + cost
  local extra = o.extra - o.dropped_extra + (units - 1) - math.max(before - 1, 0)
  local ends = now + p.window
  redis.call('ZADD', key, int(ends), token)
  if units > 1 then
    redis.call('ZADD', key, int(-units), 'u' .. token)
  end
  if extra > 0 then
    redis.call('ZADD', key, int(-extra), '#')
  elseif o.extra > 0 then
    redis.call('ZREM', key, '#')
  end
  o.held = o.held + cost
  o.remaining = math.max(p.capacity - o.held, 0)
  if before > 0 then
    -- The lease moved: the last to end may be another one now.
    local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    o.reset = tonumber(last[2]) - now
  else
    o.reset = math.max(o.reset, p.window)
  end
  keep(key, o.reset)
end
