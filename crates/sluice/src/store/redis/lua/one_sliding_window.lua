-- one_sliding_window: one sliding-window limit (see one_head.lua for a block or penalty), with the
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
local BUCKETS, CAP = 10, 16777216

local g = math.max(idiv(window, BUCKETS), 1)
local current = idiv(now, g)
-- The units in the window, its newest bucket (index, units, field) and the buckets that left it:
-- no table per bucket, since only a denial needs them in order.
local count, newest, newest_units, field, stale = 0, nil, 0, nil, nil
for i = 1, #flat, 2 do
  local idx = tonumber(flat[i])
  if idx + BUCKETS < current then
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
    if idx + BUCKETS >= current then
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
      retry = (b[1] + BUCKETS + 1) * g - now
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
  local units = math.min(newest_units + cost, CAP)
  if units == newest_units + cost then
    redis.call('HINCRBY', key, field, cost_text)
  else
    redis.call('HSET', key, field, string.format('%d', units))
  end
  count = count + units - newest_units
end
local reset = 0
if newest then
  reset = (newest + BUCKETS + 1) * g - now
end
-- The key lives as long as its newest bucket counts. That deadline moves only when a bucket
-- starts (or while min_ttl, longer than the rest, decides): a bucket that was already there
-- got it when it started.
if started or ((allowed or count_denied) and reset < min_ttl) then
  redis.call(pexpire, key,
    string.format('%d', math.ceil((expiry_from + math.max(reset, min_ttl)) / 1000)))
end
return { now, allowed and 1 or 0, math.max(limit - count, 0), reset, retry, violations, warning }
