-- token_bucket: the algorithm's one Lua source. Its sections (general, one, many, give_back,
-- settle) are the forms the Redis store generates its scripts from (store/redis/source.rs).

--@@general
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


--@@one
-- token_bucket#one: one token-bucket limit (see one_head.lua for a block or penalty), at the floor
-- of what Redis must do (TIME, GET, SET). Restates token_bucket_look and token_bucket_record
-- (token_bucket.lua, algorithm/token_bucket.rs; the same float operations in the same order) after
-- one_head.lua, without the prelude: every function a script defines costs Redis time on every
-- call. Anything but a bucket in the key (a block marker, another algorithm's state) returns {} and
-- the caller decides with the general script instead.
--
-- KEYS[1]: the state key, "t<used level, %.17g>:<last µs>".
-- ARGV, the limit's constants (and the violations key): as one_head.lua says.
-- Returns: as one_head.lua says.

local raw = redis.pcall('GET', KEYS[1])
local level, last
if raw then
  if type(raw) == 'string' then
    level, last = string.match(raw, '^t([^:]+):(%d+)$')
  end
  if not level then
    if guarded then
      return from_marker(raw)
    end
    return {}
  end
end
local used = 0
if level then
  local elapsed = math.max(now - tonumber(last), 0)
  used = math.max(tonumber(level) - elapsed * limit / window, 0)
end
local allowed = used + cost <= capacity + LEVEL_EPSILON
if not allowed and guarded then
  return {}
end
local retry = -1
if allowed then
  used = used + cost
else
  retry = math.max(math.ceil((used + cost - capacity) * window / limit), 0)
end
local reset = math.max(math.ceil(used * window / limit), 0)
if allowed then
  local ms = math.ceil((expiry_from + math.max(reset, min_ttl)) / 1000)
  redis.call('SET', KEYS[1], 't' .. string.format('%.17g', used) .. ':' .. string.format('%d', now),
    px, string.format('%d', ms))
end
local remaining = math.max(math.floor(capacity - used + LEVEL_EPSILON), 0)
return { now, allowed and 1 or 0, remaining, reset, retry, violations, warning }

--@@many
-- token_bucket#many: a token-bucket limit's part of a rule script (see many_head.lua):
-- token_bucket.lua#one, split into its look (GET) and its record (SET); the same float
-- operations in the same order.

local raw_@ = redis.pcall('GET', key_@)
local level_@, last_@
if raw_@ then
  if type(raw_@) == 'string' then
    level_@, last_@ = string.match(raw_@, '^t([^:]+):(%d+)$')
  end
  if not level_@ then
    return {}
  end
end
local used_@ = 0
if level_@ then
  used_@ = math.max(tonumber(level_@) - math.max(now - tonumber(last_@), 0) * limit_@ / window_@, 0)
end
local allowed_@ = used_@ + cost_@ <= capacity_@ + LEVEL_EPSILON
local retry_@ = -1
if not allowed_@ then
  retry_@ = math.max(math.ceil((used_@ + cost_@ - capacity_@) * window_@ / limit_@), 0)
end
local reset_@ = math.max(math.ceil(used_@ * window_@ / limit_@), 0)
local remaining_@ = math.max(math.floor(capacity_@ - used_@ + LEVEL_EPSILON), 0)
--@record
used_@ = used_@ + cost_@
reset_@ = math.max(math.ceil(used_@ * window_@ / limit_@), 0)
remaining_@ = math.max(math.floor(capacity_@ - used_@ + LEVEL_EPSILON), 0)
redis.call('SET', key_@, 't' .. string.format('%.17g', used_@) .. ':' .. string.format('%d', now),
  px, string.format('%d', math.ceil((expiry_from + math.max(reset_@, min_ttl)) / 1000)))

--@@give_back
-- token_bucket#give_back: gives back one cross-slot admission's units (see lua/give_back.lua).
-- A level's units back, less what has drained since t0 (the leaky bucket's too, by its tag).
local function level_give_back(key, p, cost, tag)
  local l, t = match_tagged(redis.pcall('GET', key), '^' .. tag .. '([^:]+):(%d+)$')
  local back = cost - elapsed * p.count / p.window
  if l and back > 0 then
    local level = math.max(drained(tonumber(l), tonumber(t), now, p) - back, 0)
    set_or_del(key, tag .. float(level) .. ':' .. int(now), level > 0)
  end
end

local function token_bucket_give_back(key, kind, p, cost)
  level_give_back(key, p, cost, 't')
end

--@@settle
-- token_bucket#settle: settles one reservation on the state read (see lua/settle.lua); returns the
-- state's new time to live.
local function token_bucket_settle(key, raw, p, actual, estimate, elapsed, now)
  local l, t = match_tagged(raw, '^t([^:]+):(%d+)$')
  local used = 0
  if l then
    used = drained(tonumber(l), tonumber(t), now, p)
  end
  local d = elapsed * p.count / p.window
  used = math.max(used + (math.max(actual - d, 0) - math.max(estimate - d, 0)), 0)
  local ttl = time_to_drain(used, p)
  put(key, 't' .. float(used) .. ':' .. int(now), ttl)
  return ttl
end
