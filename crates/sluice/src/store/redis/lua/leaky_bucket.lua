-- leaky_bucket: restates algorithm/leaky_bucket.rs as look and record.
--
-- KEY: a string "l<queue level, %.17g>:<last µs>". The level drains continuously and the fraction
-- is kept (flooring it and resetting the time would drain slower than configured). Written only
-- when a request is admitted; it expires when the queue is empty.

local function leaky_bucket_fill(o, p)
  o.reset = time_to_drain(o.level, p)
  o.remaining = math.floor(p.capacity - o.level + LEVEL_EPSILON)
  if o.remaining < 0 then
    o.remaining = 0
  end
end

local function leaky_bucket_look(key, now, p, cost)
  local raw = read_state(key)
  local l, t = match_tagged(raw, '^l([^:]+):(%d+)$')
  if not l and is_marker(raw) then
    return nil, marker_until(raw)
  end
  local level = 0
  if l then
    level = drained(tonumber(l), tonumber(t), now, p)
  end
  local o = { allowed = level + cost <= p.capacity + LEVEL_EPSILON, delay = 0, level = level }
  if o.allowed then
    o.delay = time_to_drain(level, p)
  else
    o.retry = time_to_drain(level + cost - p.capacity, p)
  end
  leaky_bucket_fill(o, p)
  return o
end

local function leaky_bucket_record(key, now, p, cost, o)
  if o.allowed then
    o.level = o.level + cost
    leaky_bucket_fill(o, p)
    put(key, 'l' .. float(o.level) .. ':' .. int(now), o.reset)
  end
end

