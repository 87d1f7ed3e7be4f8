-- sliding_window: restates algorithm/sliding_window.rs as look and record.
--
-- KEY: a HASH, field = bucket index floor(now / g) with g = max(floor(window / 10), 1),
-- value = units counted in that bucket (capped at COUNT_CAP). A bucket counts while
-- now < (index + 11) * g. Redis 7.0 has no per-field expiry (HEXPIRE is 7.4+), so stale buckets
-- are deleted here, whenever the key is written; the key itself expires when its newest bucket
-- stops counting.

local SW_BUCKETS = 10

local function sliding_window_fill(o, now, p)
  o.remaining = math.max(p.count - o.count, 0)
  o.reset = 0
  local newest = o.buckets[#o.buckets]
  if newest then
    o.reset = (newest[1] + SW_BUCKETS + 1) * o.g - now
  end
end

local function sliding_window_look(key, now, p, cost)
  local g = idiv(p.window, SW_BUCKETS)
  if g < 1 then
    g = 1
  end
  local current = idiv(now, g)
  local flat = redis.pcall('HGETALL', key)
  local o = { delay = 0, g = g, current = current, buckets = {}, stale = {}, count = 0 }
  if flat.err then
    local until_us = marker_of(key)
    if until_us then
      return nil, until_us
    end
    o.foreign = true
    flat = {}
  end
  local buckets = o.buckets
  for i = 1, #flat, 2 do
    local idx = tonumber(flat[i])
    if idx + SW_BUCKETS < current then
      o.stale[#o.stale + 1] = flat[i]
    else
      buckets[#buckets + 1] = { idx, tonumber(flat[i + 1]) }
    end
  end
  if #buckets > 1 then
    table.sort(buckets, function(a, b)
      return a[1] < b[1]
    end)
  end
  for _, b in ipairs(buckets) do
    o.count = o.count + b[2]
  end
  o.allowed = o.count + cost <= p.count
  if not o.allowed then
    local need = o.count + cost - p.count
    local freed = 0
    o.retry = p.window
    for _, b in ipairs(buckets) do
      freed = freed + b[2]
      if freed >= need then
        o.retry = (b[1] + SW_BUCKETS + 1) * g - now
        break
      end
    end
  end
  sliding_window_fill(o, now, p)
  return o
end

local function sliding_window_record(key, now, p, cost, o)
  if o.foreign then
    redis.call('DEL', key)
  end
  if #o.stale > 0 then
    redis.call('HDEL', key, unpack(o.stale))
  end
  local last = o.buckets[#o.buckets]
  if not (last and last[1] == o.current) then
    last = { o.current, 0 }
    o.buckets[#o.buckets + 1] = last
  end
  local units = math.min(last[2] + cost, COUNT_CAP)
  if units == last[2] + cost then
    redis.call('HINCRBY', key, int(o.current), int(cost))
  else
    redis.call('HSET', key, int(o.current), int(units))
  end
  o.count = o.count + units - last[2]
  last[2] = units
  sliding_window_fill(o, now, p)
  keep(key, o.reset)
end

