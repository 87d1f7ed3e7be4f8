-- settle: settles one reservation on one limit; restates algorithm/settle.rs on the states of
-- lua/token_bucket.lua and lua/gcra.lua.
--
-- KEYS[1]: the limit's state key. While the identity is blocked it holds a block marker and the
--   state is parked at KEYS[1] .. ':h' (see the prelude): it is settled there, and the marker is
--   kept alive as long as the parked state.
-- KEYS[2]: the reservation, "<estimate>:<decision time µs>:<settle by µs>", written when the
--   check was admitted (store/redis/reservation.rs). It is out of time once `now` reaches its
--   end, on the decision clock; its expiry in Redis only reclaims the memory.
-- ARGV[1]: now in µs from the client's clock, or '' to read Redis TIME.
-- ARGV[2]: the shortest expiry to write, µs (see RedisOptions::min_ttl).
-- ARGV[3]: the algorithm (4 token_bucket, 5 gcra: codes as in decide.lua).
-- ARGV[4], ARGV[5], ARGV[6]: count, window (µs), capacity.
-- ARGV[7]: the actual cost.
-- Returns 1 if the reservation was settled, 0 if it was not there (settled already, or out of
-- time): the reservation is deleted in the same step, so it settles at most once.

min_ttl_us = tonumber(ARGV[2])
local record = redis.call('GET', KEYS[2])
if not record then
  return 0
end
redis.call('DEL', KEYS[2])
local now = read_now(ARGV[1])
local estimate, t0, by = string.match(record, '^(%d+):(%d+):(%d+)$')
if not estimate or tonumber(by) <= now then
  return 0
end
estimate, t0 = tonumber(estimate), tonumber(t0)
local algorithm = tonumber(ARGV[3])
local p = { count = tonumber(ARGV[4]), window = tonumber(ARGV[5]), capacity = tonumber(ARGV[6]) }
local actual = tonumber(ARGV[7])

local key = KEYS[1]
local marker = nil
local raw = redis.pcall('GET', key)
if is_marker(raw) then
  marker = key
  key = key .. ':h'
  raw = redis.pcall('GET', key)
end
local elapsed = math.max(now - t0, 0)
local ttl = 0
if algorithm == 4 then
  local l, t = match_tagged(raw, '^t([^:]+):(%d+)$')
  local used = 0
  if l then
    used = drained(tonumber(l), tonumber(t), now, p)
  end
  local d = elapsed * p.count / p.window
  used = math.max(used + (math.max(actual - d, 0) - math.max(estimate - d, 0)), 0)
  ttl = time_to_drain(used, p)
  put(key, 't' .. float(used) .. ':' .. int(now), ttl)
elseif algorithm == 5 then
  local tat = 0
  if type(raw) == 'string' then
    tat = tonumber(raw) or 0
  end
  local t = idiv_ceil(p.window, p.count)
  tat = math.max(tat, now)
  tat = math.max(tat + math.max(actual * t - elapsed, 0) - math.max(estimate * t - elapsed, 0), now)
  ttl = tat - now
  put(key, int(tat), ttl)
end
if marker and ttl > 0 and redis.call('PTTL', marker) < tonumber(px(ttl)) then
  expire(marker, ttl)
end
return 1
