-- sliding_log(key, now, p, cost, apply) -> outcome; restates algorithm/sliding_log.rs.
--
-- KEY: a ZSET, one member per admitted unit, score = its time (µs). Members are
-- "<time>-<n>" with n unique among the members of that time, so units admitted in the same
-- microsecond are distinct members (the count is exact). A unit at t counts while now < t + window.
-- With apply == false nothing is written. The key expires when its newest unit leaves the window.

local function sliding_log(key, now, p, cost, apply)
  local horizon = now - p.window
  local kind = redis.call('TYPE', key).ok
  local valid = kind == 'zset'
  local recorded = false
  local count = 0
  if valid then
    count = redis.call('ZCOUNT', key, '(' .. int(horizon), '+inf')
  end
  local allowed = count + cost <= p.limit
  local retry = nil
  if not allowed then
    -- The request fits once `need` of the oldest units have left the window.
    local need = count + cost - p.limit
    retry = p.window
    if valid and need <= count then
      local e = redis.call('ZRANGEBYSCORE', key, '(' .. int(horizon), '+inf', 'WITHSCORES',
        'LIMIT', int(need - 1), 1)
      if e[2] then
        retry = tonumber(e[2]) + p.window - now
      end
    end
  end
  if apply and (allowed or p.count_denied) then
    recorded = true
    if valid then
      redis.call('ZREMRANGEBYSCORE', key, '-inf', int(horizon))
    elseif kind ~= 'none' then
      redis.call('DEL', key)
    end
    -- Beyond `limit` units only the newest `limit` matter (see sliding_log::record).
    local add = math.min(cost, p.limit)
    local stamp = int(now)
    local n = redis.call('ZCOUNT', key, stamp, stamp)
    local probe = n > 0
    local args = {}
    for _ = 1, add do
      local member = stamp .. '-' .. int(n)
      n = n + 1
      -- Older members of this same time may have been trimmed out of order: skip taken names.
      while probe and redis.call('ZSCORE', key, member) do
        member = stamp .. '-' .. int(n)
        n = n + 1
      end
      args[#args + 1] = stamp
      args[#args + 1] = member
      if #args >= 2000 then
        redis.call('ZADD', key, unpack(args))
        args = {}
      end
    end
    if #args > 0 then
      redis.call('ZADD', key, unpack(args))
    end
    count = count + add
    if count > p.limit then
      redis.call('ZREMRANGEBYRANK', key, 0, int(count - p.limit - 1))
      count = p.limit
    end
  end
  local reset = 0
  if valid or recorded then
    local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    if newest[2] then
      local t = tonumber(newest[2])
      if t > horizon then
        reset = t + p.window - now
      end
    end
  end
  if recorded then
    keep(key, reset)
  end
  return outcome(allowed, math.max(p.limit - count, 0), reset, retry, 0)
end

