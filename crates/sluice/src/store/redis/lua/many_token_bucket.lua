-- many_token_bucket: a token-bucket limit's part of a rule script (see many_head.lua):
-- one_token_bucket.lua, split into its look (GET) and its record (SET); the same float
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
local allowed_@ = used_@ + cost_@ <= capacity_@ + 1e-6
local retry_@ = -1
if not allowed_@ then
  retry_@ = math.max(math.ceil((used_@ + cost_@ - capacity_@) * window_@ / limit_@), 0)
end
local reset_@ = math.max(math.ceil(used_@ * window_@ / limit_@), 0)
local remaining_@ = math.max(math.floor(capacity_@ - used_@ + 1e-6), 0)
--@record
used_@ = used_@ + cost_@
reset_@ = math.max(math.ceil(used_@ * window_@ / limit_@), 0)
remaining_@ = math.max(math.floor(capacity_@ - used_@ + 1e-6), 0)
redis.call('SET', key_@, 't' .. string.format('%.17g', used_@) .. ':' .. string.format('%d', now),
  px, string.format('%d', math.ceil((expiry_from + math.max(reset_@, min_ttl)) / 1000)))
