-- one_head: the opening of every one-limit script (one_<algorithm>.lua), which follows it: the
-- decision time and the limit's arguments. It holds only what every one of them uses, since each
-- line runs on every call.
--
-- ARGV: now in µs from the client's clock ('' to read Redis TIME), the shortest expiry to write in
--   µs (see RedisOptions::min_ttl), count (units per window), window_us, capacity, cost, then
--   whatever the script documents.

local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
end
local limit, window, capacity, cost = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]),
  tonumber(ARGV[6])
