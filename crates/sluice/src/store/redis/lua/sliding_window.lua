-- sliding_window: the algorithm's one Lua source. Its sections (general, one, many, give_back) are
-- the forms the Redis store generates its scripts from (store/redis/source.rs).

--@@general
-- sliding_window: restates algorithm/sliding_window.rs as look and record.
--
-- KEY: a HASH, field = bucket index floor(now / g) with g = max(floor(window / 10), 1),
-- value = units counted in that bucket (capped at COUNT_CAP). A bucket counts while
-- now < (index + 11) * g. Redis 7.0 has no per-field expiry (HEXPIRE is 7.4+), so stale buckets
-- are deleted here, whenever the key is written; the key itself expires when its newest bucket
-- stops counting.


local function sliding_window_fill(o, now, p)
  o.remaining = math.max(p.count - o.count, 0)
  o.reset = 0
  local newest = o.buckets[#o.buckets]
  if newest then
    o.reset = (newest[1] + SLIDING_WINDOW_BUCKETS + 1) * o.g - now
  end
end

local function sliding_window_look(key, now, p, cost)
  local g = idiv(p.window, SLIDING_WINDOW_BUCKETS)
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
    if idx + SLIDING_WINDOW_BUCKETS < current then
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
        o.retry = (b[1] + SLIDING_WINDOW_BUCKETS + 1) * g - now
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


--@@one
-- sliding_window#one: one sliding-window limit (see one_head.lua for a block or penalty), with the
-- least Redis work (TIME, HGETALL, then HDEL of stale buckets, HINCRBY, and PEXPIRE when it
-- starts a bucket). Restates sliding_window_look and sliding_window_record (sliding_window.lua,
-- algorithm/sliding_window.rs) after one_head.lua and idiv.lua, without the prelude: every function
-- a script defines costs Redis time on every call. Anything but a hash in the key (a block marker,
-- another algorithm's state) returns {} and the caller decides with the general script instead.
--
-- KEYS[1]: the state key, a HASH of bucket index -> units.
-- ARGV, the limit's constants (and the violations key): as one_head.lua says.
-- Returns: as one_head.lua says.

local key = KEYS[1]
local flat = redis.pcall('HGETALL', key)
if flat.err then
  if guarded then
    local held = redis.pcall('GET', key)
    return from_marker(held)
  end
  return {}
end

local g = math.max(idiv(window, SLIDING_WINDOW_BUCKETS), 1)
local current = idiv(now, g)
-- The units in the window, its newest bucket (index, units, field) and the buckets that left it:
-- no table per bucket, since only a denial needs them in order.
local count, newest, newest_units, field, stale = 0, nil, 0, nil, nil
for i = 1, #flat, 2 do
  local idx = tonumber(flat[i])
  if idx + SLIDING_WINDOW_BUCKETS < current then
    stale = stale or {}
    stale[#stale + 1] = flat[i]
  else
    local units = tonumber(flat[i + 1])
    count = count + units
    if not newest or idx > newest then
      newest, newest_units, field = idx, units, flat[i]
    end
  end
end
local allowed = count + cost <= limit
if not allowed and guarded then
  return {}
end
local retry = -1
if not allowed then
  -- The oldest buckets leave the window first.
  local buckets = {}
  for i = 1, #flat, 2 do
    local idx = tonumber(flat[i])
    if idx + SLIDING_WINDOW_BUCKETS >= current then
      buckets[#buckets + 1] = { idx, tonumber(flat[i + 1]) }
    end
  end
  table.sort(buckets, function(a, b)
    return a[1] < b[1]
  end)
  local need, freed = count + cost - limit, 0
  retry = window
  for _, b in ipairs(buckets) do
    freed = freed + b[2]
    if freed >= need then
      retry = (b[1] + SLIDING_WINDOW_BUCKETS + 1) * g - now
      break
    end
  end
end
local started = false
if allowed or count_denied then
  if stale then
    redis.call('HDEL', key, unpack(stale))
  end
  if newest ~= current then
    newest, newest_units, field, started = current, 0, string.format('%d', current), true
  end
  local units = math.min(newest_units + cost, COUNT_CAP)
  if units == newest_units + cost then
    redis.call('HINCRBY', key, field, cost_text)
  else
    redis.call('HSET', key, field, string.format('%d', units))
  end
  count = count + units - newest_units
end
local reset = 0
if newest then
  reset = (newest + SLIDING_WINDOW_BUCKETS + 1) * g - now
end
-- The key lives as long as its newest bucket counts. That deadline moves only when a bucket
-- starts (or while min_ttl, longer than the rest, decides): a bucket that was already there
-- got it when it started.
if started or ((allowed or count_denied) and reset < min_ttl) then
  redis.call(pexpire, key,
    string.format('%d', math.ceil((expiry_from + math.max(reset, min_ttl)) / 1000)))
end
return { now, allowed and 1 or 0, math.max(limit - count, 0), reset, retry, violations, warning }

--@@many
-- sliding_window#many: a sliding-window limit's part of a rule script (see many_head.lua):
-- sliding_window.lua#one, split into its look (HGETALL) and its record (HDEL of stale buckets,
-- HINCRBY, and PEXPIRE when it starts a bucket).
--
-- KEY: a HASH of bucket index -> units (see sliding_window.lua).

local flat_@ = redis.pcall('HGETALL', key_@)
if flat_@.err then
  return {}
end
local g_@ = math.max(idiv(window_@, SLIDING_WINDOW_BUCKETS), 1)
local current_@ = idiv(now, g_@)
local count_@, newest_@, newest_units_@, field_@, stale_@ = 0, nil, 0, nil, nil
for i = 1, #flat_@, 2 do
  local idx = tonumber(flat_@[i])
  if idx + SLIDING_WINDOW_BUCKETS < current_@ then
    stale_@ = stale_@ or {}
    stale_@[#stale_@ + 1] = flat_@[i]
  else
    local units = tonumber(flat_@[i + 1])
    count_@ = count_@ + units
    if not newest_@ or idx > newest_@ then
      newest_@, newest_units_@, field_@ = idx, units, flat_@[i]
    end
  end
end
local allowed_@ = count_@ + cost_@ <= limit_@
local retry_@ = -1
if not allowed_@ then
  local buckets = {}
  for i = 1, #flat_@, 2 do
    local idx = tonumber(flat_@[i])
    if idx + SLIDING_WINDOW_BUCKETS >= current_@ then
      buckets[#buckets + 1] = { idx, tonumber(flat_@[i + 1]) }
    end
  end
  table.sort(buckets, function(a, b)
    return a[1] < b[1]
  end)
  local need, freed = count_@ + cost_@ - limit_@, 0
  retry_@ = window_@
  for _, b in ipairs(buckets) do
    freed = freed + b[2]
    if freed >= need then
      retry_@ = (b[1] + (SLIDING_WINDOW_BUCKETS + 1)) * g_@ - now
      break
    end
  end
end
local remaining_@ = math.max(limit_@ - count_@, 0)
local reset_@ = 0
if newest_@ then
  reset_@ = (newest_@ + (SLIDING_WINDOW_BUCKETS + 1)) * g_@ - now
end
--@record
if stale_@ then
  redis.call('HDEL', key_@, unpack(stale_@))
end
local started = newest_@ ~= current_@
if started then
  newest_units_@, field_@ = 0, string.format('%d', current_@)
end
local units = math.min(newest_units_@ + cost_@, COUNT_CAP)
if units == newest_units_@ + cost_@ then
  redis.call('HINCRBY', key_@, field_@, cost_text_@)
else
  redis.call('HSET', key_@, field_@, string.format('%d', units))
end
count_@ = count_@ + units - newest_units_@
remaining_@ = math.max(limit_@ - count_@, 0)
reset_@ = (current_@ + (SLIDING_WINDOW_BUCKETS + 1)) * g_@ - now
if started or reset_@ < min_ttl then
  redis.call(pexpire, key_@, string.format('%d', math.ceil((expiry_from + math.max(reset_@, min_ttl)) / 1000)))
end

--@@give_back
-- sliding_window#give_back: gives back one cross-slot admission's units (see lua/give_back.lua).
local function sliding_window_give_back(key, kind, p, cost)
  if kind ~= 'hash' then
    return
  end
  local g = math.max(idiv(p.window, SLIDING_WINDOW_BUCKETS), 1)
  local field = int(idiv(t0, g))
  local held = tonumber(redis.call('HGET', key, field))
  if held then
    if held > cost then
      redis.call('HSET', key, field, int(held - cost))
    else
      redis.call('HDEL', key, field)
      if redis.call('HLEN', key) == 0 then
        redis.call('DEL', key)
      end
    end
    changed = changed + 1
  end
end
