-- settle: settles one reservation on one limit; restates algorithm/settle.rs, each settling
-- algorithm in its source's `settle` section (<name>.lua#settle), written in where `--@@settle`
-- stands below: `<name>_settle(key, raw, p, actual, estimate, elapsed, now)` returns the state's
-- new time to live. SETTLES lists them by code (false: the algorithm does not settle).
--
-- KEYS[1]: the limit's state key. While the identity is blocked it holds a block marker and the
--   state is parked at KEYS[1] .. ':h' (see the prelude): it is settled there, and the marker is
--   kept alive as long as the parked state.
-- KEYS[2]: the reservation, "<estimate>:<decision time µs>:<settle by µs>", written when the
--   check was admitted (store/redis/reservation.rs). It is out of time once `now` reaches its
--   end, on the decision clock; its expiry in Redis only reclaims the memory.
-- ARGV[1]: now in µs from the client's clock, or '' to read Redis TIME.
-- ARGV[2]: the shortest expiry to write, µs (see RedisOptions::min_ttl).
-- ARGV[3]: the algorithm's code (a settling one: token_bucket or gcra).
-- ARGV[4], ARGV[5], ARGV[6]: count, window (µs), capacity.
-- ARGV[7]: the actual cost.
-- Returns 1 if the reservation was settled, 0 if it was not there (settled already, or out of
-- time): the reservation is deleted in the same step, so it settles at most once.

--@@settle

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
  key = key .. PARKED
  raw = redis.pcall('GET', key)
end
local elapsed = math.max(now - t0, 0)
local settle = SETTLES[algorithm]
local ttl = 0
if settle then
  ttl = settle(key, raw, p, actual, estimate, elapsed, now)
end
if marker and ttl > 0 and redis.call('PTTL', marker) < tonumber(px(ttl)) then
  expire(marker, ttl)
end
return 1
