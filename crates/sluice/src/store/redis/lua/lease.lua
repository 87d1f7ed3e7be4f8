-- lease: ends or extends one lease of a concurrency limit; restates concurrency::release and
-- concurrency::renew (algorithm/concurrency.rs) on the sorted set of lua/concurrency.lua.
--
-- KEYS[1]: the limit's state key. While the identity is blocked it holds a block marker and the
--   leases are parked at KEYS[1] .. ':h' (see the prelude): they are released or renewed there,
--   and a renewal keeps the marker alive as long as the parked leases.
-- ARGV[1]: now in µs from the client's clock, or '' to read Redis TIME.
-- ARGV[2]: the shortest expiry to write, µs (see RedisOptions::min_ttl).
-- ARGV[3]: 'release' or 'renew'.
-- ARGV[4]: the lease's token.
-- ARGV[5]: renew: the lease duration, µs.
-- Returns: release: 1 if the lease was in force (it is gone now), else 0; renew: the lease's new
--   end (µs), or -1 if it was not in force (nothing changes then).

local now = read_now(ARGV[1])
min_ttl_us = tonumber(ARGV[2])
local renew = ARGV[3] == 'renew'
local token = ARGV[4]
local key = KEYS[1]
local state = key
local held = redis.pcall('GET', key)
if is_marker(held) then
  state = key .. PARKED
end
local ends = redis.pcall('ZSCORE', state, token)
if type(ends) ~= 'string' or tonumber(ends) <= now then
  if renew then
    return -1
  end
  return 0
end

-- Keeps the state (and, when parked, the marker) until its last lease ends.
local function last_end()
  local last = redis.call('ZRANGE', state, -1, -1, 'WITHSCORES')
  return tonumber(last[2] or 0)
end

if renew then
  local until_us = now + tonumber(ARGV[5])
  redis.call('ZADD', state, int(until_us), token)
  local ttl = math.max(last_end() - now, 0)
  keep(state, ttl)
  if state ~= key and redis.call('PTTL', key) < tonumber(px(ttl)) then
    expire(key, ttl)
  end
  return until_us
end

redis.call('ZREM', state, token)
local units = tonumber(redis.call('ZSCORE', state, 'u' .. token))
if units then
  redis.call('ZREM', state, 'u' .. token)
  local extra = -(tonumber(redis.call('ZSCORE', state, '#')) or 0) - (-units - 1)
  if extra > 0 then
    redis.call('ZADD', state, int(-extra), '#')
  else
    redis.call('ZREM', state, '#')
  end
end
if state == key then
  keep(key, math.max(last_end() - now, 0))
end
return 1
