-- many_sliding_log: a sliding-log limit's part of a rule script (see many_head.lua):
-- one_sliding_log.lua, split into its look (the oldest and newest members) and its record
-- (ZADD, PEXPIRE; ZREMRANGEBYSCORE only when requests left the window). A denial (its retry time
-- needs a search) or a log due for rebasing returns {}, as there.

local first_@ = redis.pcall('ZRANGE', key_@, '0', '0', 'WITHSCORES')
if first_@.err then
  return {}
end
local horizon_@ = now - window_@
local expired_@ = false
if first_@[1] and tonumber(first_@[2]) <= horizon_@ then
  expired_@ = true
  first_@ = redis.call('ZRANGEBYSCORE', key_@, '(' .. string.format('%d', horizon_@), '+inf',
    'WITHSCORES', 'LIMIT', '0', '1')
end
local base_@, start_@, t_@, reset_@ = 0, 0, now, 0
if first_@[1] then
  local oldest = first_@[1]
  base_@ = string.byte(oldest, 17) == 58 and tonumber(string.sub(oldest, 1, 16))
  if not base_@ then
    return {}
  end
  local newest = redis.call('ZRANGE', key_@, '-1', '-1', 'WITHSCORES')
  start_@ = tonumber(string.sub(newest[1], 1, 16)) + tonumber(string.sub(newest[1], 18))
  reset_@ = tonumber(newest[2]) + window_@ - now
  t_@ = math.max(now, tonumber(newest[2]))
end
if start_@ - base_@ + cost_@ > limit_@ or start_@ + cost_@ > 2251799813685248 then
  return {}
end
local allowed_@, retry_@ = true, -1
local remaining_@ = math.max(limit_@ - start_@ + base_@, 0)
--@record
if expired_@ then
  redis.call('ZREMRANGEBYSCORE', key_@, '-inf', string.format('%d', horizon_@))
end
redis.call('ZADD', key_@, string.format('%d', t_@), string.format('%016d:%d', start_@, cost_@))
remaining_@ = limit_@ - start_@ + base_@ - cost_@
reset_@ = t_@ + window_@ - now
redis.call(pexpire, key_@,
  string.format('%d', math.ceil((expiry_from + math.max(reset_@, min_ttl)) / 1000)))
