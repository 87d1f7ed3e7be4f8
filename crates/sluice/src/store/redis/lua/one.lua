-- one: decides a request with one limit that configures neither block nor penalty, the common
-- case, with the least Redis work: one state key, the algorithm run once (its look, then its
-- record), no block or violation key read (an administrative block leaves a marker in the state
-- key, see the prelude). The lines before this file bind LOOK, RECORD and ONCE (nil, or the
-- algorithm's single-command path) to one algorithm (store/redis/script.rs).
--
-- KEYS[1]: the state key.
-- ARGV: now in µs from the client's clock ('' to read Redis TIME), the shortest expiry to write
--   in µs (0 in production; see RedisOptions::min_ttl), 'apply' or 'peek', limit, window_us,
--   capacity, cost, count_denied (0/1).
-- Returns: { now_us, allowed (0/1), remaining, reset_after_us, retry_after_us (-1: none),
--   delay_us, blocked_until_us (-1: none), violations (0), warning (0) }.

local now = read_now(ARGV[1])
min_ttl_us = tonumber(ARGV[2])
local peek = ARGV[3] == 'peek'
local p = {
  limit = tonumber(ARGV[4]),
  window = tonumber(ARGV[5]),
  capacity = tonumber(ARGV[6]),
  count_denied = ARGV[8] == '1',
}
local cost = tonumber(ARGV[7])
local key = KEYS[1]

local o
if ONCE and not peek then
  o = ONCE(key, now, p, cost)
end
if not o then
  o = look_state(LOOK, key, now, p, cost, peek)
  if not peek and not o.blocked_until and (o.allowed or p.count_denied) then
    RECORD(key, now, p, cost, o)
  end
end
return { now, o.allowed and 1 or 0, o.remaining, o.reset, o.retry or -1, o.delay,
         o.blocked_until or -1, 0, 0 }
