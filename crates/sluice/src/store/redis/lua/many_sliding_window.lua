-- many_sliding_window: a sliding-window limit's part of a rule script (see many_head.lua):
-- one_sliding_window.lua, split into its look (HGETALL) and its record (HDEL of stale buckets,
-- HINCRBY, PEXPIRE).
--
-- KEY: a HASH of bucket index -> units (see sliding_window.lua).

local flat_@ = redis.pcall('HGETALL', key_@)
if flat_@.err then
  return {}
end
local g_@ = math.max(idiv(window_@, 10), 1)
local current_@ = idiv(now, g_@)
local buckets_@, stale_@, count_@ = {}, {}, 0
for i = 1, #flat_@, 2 do
  local idx = tonumber(flat_@[i])
  if idx + 10 < current_@ then
    stale_@[#stale_@ + 1] = flat_@[i]
  else
    local units = tonumber(flat_@[i + 1])
    buckets_@[#buckets_@ + 1] = { idx, units }
    count_@ = count_@ + units
  end
end
if #buckets_@ > 1 then
  table.sort(buckets_@, function(a, b)
    return a[1] < b[1]
  end)
end
local allowed_@ = count_@ + cost_@ <= limit_@
local retry_@ = -1
if not allowed_@ then
  local need, freed = count_@ + cost_@ - limit_@, 0
  retry_@ = window_@
  for _, b in ipairs(buckets_@) do
    freed = freed + b[2]
    if freed >= need then
      retry_@ = (b[1] + 11) * g_@ - now
      break
    end
  end
end
local remaining_@ = math.max(limit_@ - count_@, 0)
local reset_@ = 0
if buckets_@[1] then
  reset_@ = (buckets_@[#buckets_@][1] + 11) * g_@ - now
end
--@record
if #stale_@ > 0 then
  redis.call('HDEL', key_@, unpack(stale_@))
end
local last = buckets_@[#buckets_@]
if not (last and last[1] == current_@) then
  last = { current_@, 0 }
  buckets_@[#buckets_@ + 1] = last
end
local units = math.min(last[2] + cost_@, 16777216)
if units == last[2] + cost_@ then
  redis.call('HINCRBY', key_@, string.format('%d', current_@), cost_text_@)
else
  redis.call('HSET', key_@, string.format('%d', current_@), string.format('%d', units))
end
count_@ = count_@ + units - last[2]
remaining_@ = math.max(limit_@ - count_@, 0)
reset_@ = (current_@ + 11) * g_@ - now
redis.call(pexpire, key_@, string.format('%d', math.ceil((expiry_from + math.max(reset_@, min_ttl)) / 1000)))
