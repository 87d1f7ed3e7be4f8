-- one_sliding_log: one sliding-log limit (see one_head.lua for a block or penalty), admitting with
-- the least Redis work (TIME, the oldest and newest members, ZADD, PEXPIRE; ZREMRANGEBYSCORE only
-- when requests left the window). Restates sliding_log_look and sliding_log_record
-- (sliding_log.lua, algorithm/sliding_log.rs) for a request that fits, after one_head.lua, without
-- the prelude: every function a script defines costs Redis time on every call. A denial (its retry
-- time needs a search), a key holding anything but the log (another algorithm's sorted set too), or
-- a log due for rebasing returns {} having written nothing, and the caller decides with the general
-- script instead.
--
-- KEYS[1]: the state key, a ZSET (see sliding_log.lua).
-- ARGV, the limit's constants (and the violations key): as one_head.lua says.
-- Returns: as one_head.lua says (always allowed).

local key = KEYS[1]
local first = redis.pcall('ZRANGE', key, '0', '0', 'WITHSCORES')
if first.err then
  if guarded then
    local held = redis.pcall('GET', key)
    return from_marker(held)
  end
  return {}
end
local horizon = now - window
local expired = false
if first[1] and tonumber(first[2]) <= horizon then
  expired = true
  first = redis.call('ZRANGEBYSCORE', key, '(' .. string.format('%d', horizon), '+inf',
    'WITHSCORES', 'LIMIT', 0, 1)
end
local base, start, t = 0, 0, now
if first[1] then
  -- A member is "<start, 16 digits>:<units>" (see sliding_log.lua): cut, not matched.
  local oldest = first[1]
  base = string.byte(oldest, 17) == 58 and tonumber(string.sub(oldest, 1, 16))
  if not base then
    return {}
  end
  local newest = redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')
  start = tonumber(string.sub(newest[1], 1, 16)) + tonumber(string.sub(newest[1], 18))
  t = math.max(now, tonumber(newest[2]))
end
local count = start - base
if count + cost > limit or start + cost > 2251799813685248 then
  return {}
end
if expired then
  redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', horizon))
end
redis.call('ZADD', key, string.format('%d', t), string.format('%016d:%d', start, cost))
local reset = t + window - now
redis.call(pexpire, key,
  string.format('%d', math.ceil((expiry_from + math.max(reset, min_ttl)) / 1000)))
return { now, 1, limit - count - cost, reset, -1, violations, warning }
