-- leaky_bucket(key, now, p, cost, apply) -> outcome; restates algorithm/leaky_bucket.rs.
--
-- KEY: a string "l<queue level, %.17g>:<last µs>". The level drains continuously and the fraction
-- is kept (flooring it and resetting the time would drain slower than configured). Written only
-- when a request is admitted with apply; it expires when the queue is empty.

local function leaky_bucket(key, now, p, cost, apply)
  local l, t = get_tagged(key, '^l([^:]+):(%d+)$')
  local level = 0
  if l then
    level = drained(tonumber(l), tonumber(t), now, p)
  end
  local allowed = level + cost <= p.capacity + LEVEL_EPSILON
  local delay = 0
  local retry = nil
  if allowed then
    delay = time_to_drain(level, p)
  else
    retry = time_to_drain(level + cost - p.capacity, p)
  end
  local recorded = apply and allowed
  if recorded then
    level = level + cost
  end
  local reset = time_to_drain(level, p)
  if recorded then
    put(key, 'l' .. float(level) .. ':' .. int(now), reset)
  end
  local remaining = math.floor(p.capacity - level + LEVEL_EPSILON)
  if remaining < 0 then
    remaining = 0
  end
  return outcome(allowed, remaining, reset, retry, delay)
end

