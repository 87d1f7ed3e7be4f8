-- many_sliding_window: a sliding-window limit's part of a rule script (see many_head.lua):
-- one_sliding_window.lua, split into its look (HGETALL) and its record (HDEL of stale buckets,
-- HINCRBY, and PEXPIRE when it starts a bucket).
--
-- KEY: a HASH of bucket index -> units (see sliding_window.lua).

local flat_@ = redis.pcall('HGETALL', key_@)
if flat_@.err then
  return {}
end
local g_@ = math.max(idiv(window_@, 10), 1)
local current_@ = idiv(now, g_@)
local count_@, newest_@, newest_units_@, field_@, stale_@ = 0, nil, 0, nil, nil
for i = 1, #flat_@, 2 do
  local idx = tonumber(flat_@[i])
  if idx + 10 < current_@ then
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
    if idx + 10 >= current_@ then
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
      retry_@ = (b[1] + 11) * g_@ - now
      break
    end
  end
end
local remaining_@ = math.max(limit_@ - count_@, 0)
local reset_@ = 0
if newest_@ then
  reset_@ = (newest_@ + 11) * g_@ - now
end
--@record
if stale_@ then
  redis.call('HDEL', key_@, unpack(stale_@))
end
local started = newest_@ ~= current_@
if started then
  newest_units_@, field_@ = 0, string.format('%d', current_@)
end
local units = math.min(newest_units_@ + cost_@, 16777216)
if units == newest_units_@ + cost_@ then
  redis.call('HINCRBY', key_@, field_@, cost_text_@)
else
  redis.call('HSET', key_@, field_@, string.format('%d', units))
end
count_@ = count_@ + units - newest_units_@
remaining_@ = math.max(limit_@ - count_@, 0)
reset_@ = (current_@ + 11) * g_@ - now
if started or reset_@ < min_ttl then
  redis.call(pexpire, key_@, string.format('%d', math.ceil((expiry_from + math.max(reset_@, min_ttl)) / 1000)))
end
