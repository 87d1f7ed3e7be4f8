-- token_bucket: restates algorithm/token_bucket.rs as look and record.
--
-- KEY: a string "t<used level, %.17g>:<last µs>": the units used (fractions kept) at `last`,
-- draining at limit / window. Written only when a request is admitted; it expires when the bucket
-- is full again. The float operations are those of the Rust code, in the same order.

local function token_bucket_fill(o, p)
  o.reset = time_to_drain(o.used, p)
  o.remaining = math.floor(p.capacity - o.used + LEVEL_EPSILON)
  if o.remaining < 0 then
    o.remaining = 0
  end
end

local function token_bucket_look(key, now, p, cost)
  local raw = read_state(key)
  local l, t = match_tagged(raw, '^t([^:]+):(%d+)$')
  if not l and is_marker(raw) then
    return nil, marker_until(raw)
  end
  local used = 0
  if l then
    used = drained(tonumber(l), tonumber(t), now, p)
  end
  local o = { allowed = used + cost <= p.capacity + LEVEL_EPSILON, delay = 0, used = used }
  if not o.allowed then
    o.retry = time_to_drain(used + cost - p.capacity, p)
  end
  token_bucket_fill(o, p)
  return o
end

local function token_bucket_record(key, now, p, cost, o)
  if o.allowed then
    o.used = o.used + cost
    token_bucket_fill(o, p)
    put(key, 't' .. float(o.used) .. ':' .. int(now), o.reset)
  end
end

