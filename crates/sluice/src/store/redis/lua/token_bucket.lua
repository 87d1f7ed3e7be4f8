-- token_bucket(key, now, p, cost, apply) -> outcome; restates algorithm/token_bucket.rs.
--
-- KEY: a string "t<used level, %.17g>:<last µs>": the units used (fractions kept) at `last`,
-- draining at limit / window. Written only when a request is admitted with apply; it expires when
-- the bucket is full again. The float operations are those of the Rust code, in the same order.

local function token_bucket(key, now, p, cost, apply)
  local l, t = get_tagged(key, '^t([^:]+):(%d+)$')
  local used = 0
  if l then
    used = drained(tonumber(l), tonumber(t), now, p)
  end
  local allowed = used + cost <= p.capacity + LEVEL_EPSILON
  local retry = nil
  if not allowed then
    retry = time_to_drain(used + cost - p.capacity, p)
  end
  local recorded = apply and allowed
  if recorded then
    used = used + cost
  end
  local reset = time_to_drain(used, p)
  if recorded then
    put(key, 't' .. float(used) .. ':' .. int(now), reset)
  end
  local remaining = math.floor(p.capacity - used + LEVEL_EPSILON)
  if remaining < 0 then
    remaining = 0
  end
  return outcome(allowed, remaining, reset, retry, 0)
end

