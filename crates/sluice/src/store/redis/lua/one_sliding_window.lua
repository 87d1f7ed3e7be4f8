-- one_sliding_window: one sliding-window limit (see one_head.lua for a block or penalty), with the
-- least Redis work (TIME, HGETALL, then HDEL of stale buckets, HINCRBY and PEXPIRE when it
-- records). Restates sliding_window_look and sliding_window_record (sliding_window.lua,
-- algorithm/sliding_window.rs) after one_head.lua and idiv.lua, without the prelude: every function
-- a script defines costs Redis time on every call. Anything but a hash in the key (a block marker,
-- another algorithm's state) returns {} and the caller decides with the general script instead.
--
-- KEYS[1]: the state key, a HASH of bucket index -> units.
-- ARGV, the limit's constants (and KEYS[2]): as one_head.lua says.
-- Returns: as one_head.lua says.

local key = KEYS[1]
local flat = redis.pcall('HGETALL', key)
if flat.err then
  if guarded then
    return from_marker(redis.pcall('GET', key))
  end
  return {}
end
local BUCKETS, CAP = 10, 16777216

local g = math.max(idiv(window, BUCKETS), 1)
local current = idiv(now, g)
local buckets, stale, count = {}, {}, 0
for i = 1, #flat, 2 do
  local idx = tonumber(flat[i])
  if idx + BUCKETS < current then
    stale[#stale + 1] = flat[i]
  else
    local units = tonumber(flat[i + 1])
    buckets[#buckets + 1] = { idx, units }
    count = count + units
  end
end
if #buckets > 1 then
  table.sort(buckets, function(a, b)
    return a[1] < b[1]
  end)
end
local allowed = count + cost <= limit
if not allowed and guarded then
  return {}
end
local retry = -1
if not allowed then
  local need = count + cost - limit
  local freed = 0
  retry = window
  for _, b in ipairs(buckets) do
    freed = freed + b[2]
    if freed >= need then
      retry = (b[1] + BUCKETS + 1) * g - now
      break
    end
  end
end
if allowed or count_denied then
  if #stale > 0 then
    redis.call('HDEL', key, unpack(stale))
  end
  local last = buckets[#buckets]
  if not (last and last[1] == current) then
    last = { current, 0 }
    buckets[#buckets + 1] = last
  end
  local units = math.min(last[2] + cost, CAP)
  if units == last[2] + cost then
    redis.call('HINCRBY', key, string.format('%d', current), ARGV[2])
  else
    redis.call('HSET', key, string.format('%d', current), string.format('%d', units))
  end
  count = count + units - last[2]
  last[2] = units
end
local reset = 0
local newest = buckets[#buckets]
if newest then
  reset = (newest[1] + BUCKETS + 1) * g - now
end
if allowed or count_denied then
  redis.call(pexpire, key,
    string.format('%d', math.ceil((expiry_from + math.max(reset, min_ttl)) / 1000)))
end
return { now, allowed and 1 or 0, math.max(limit - count, 0), reset, retry, violations, warning }
