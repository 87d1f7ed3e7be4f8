-- token_bucket: restates algorithm/token_bucket.rs as look and record, over the draining level
-- both buckets share (algorithm::Level; leaky_bucket.lua, which follows, uses the level_*
-- functions too).
--
-- KEY: a string "t<used level, %.17g>:<last µs>": the units used (fractions kept) at `last`,
-- draining at limit / window. Written only when a request is admitted; it expires when the bucket
-- is full again. The float operations are those of the Rust code, in the same order.

-- A level's remaining units and the time until it has drained.
local function level_fill(o, p)
  o.reset = time_to_drain(o.level, p)
  o.remaining = math.floor(p.capacity - o.level + LEVEL_EPSILON)
  if o.remaining < 0 then
    o.remaining = 0
  end
end

-- Reads the level held as "<tag><level>:<last µs>" (`pattern` matches it) as it is now, and
-- whether `cost` more fits: the outcome without its remaining and reset, or nil and a block's end.
local function level_look(key, now, p, cost, pattern)
  local raw = read_state(key)
  local l, t = match_tagged(raw, pattern)
  if not l and is_marker(raw) then
    return nil, marker_until(raw)
  end
  local level = 0
  if l then
    level = drained(tonumber(l), tonumber(t), now, p)
  end
  local o = { allowed = level + cost <= p.capacity + LEVEL_EPSILON, delay = 0, level = level }
  if not o.allowed then
    o.retry = time_to_drain(level + cost - p.capacity, p)
  end
  return o
end

-- Adds an admitted request's cost to the level and writes it with its tag.
local function level_record(key, now, p, cost, o, tag)
  if o.allowed then
    o.level = o.level + cost
    level_fill(o, p)
    put(key, tag .. float(o.level) .. ':' .. int(now), o.reset)
  end
end

local function token_bucket_look(key, now, p, cost)
  local o, until_us = level_look(key, now, p, cost, '^t([^:]+):(%d+)$')
  if o then
    level_fill(o, p)
  end
  return o, until_us
end

local function token_bucket_record(key, now, p, cost, o)
  level_record(key, now, p, cost, o, 't')
end

