-- now: the decision time, the first lines of every script made for a limit or a rule (one_head.lua,
-- many_head.lua follow it). ARGV[now_at], after the costs (its index is written into the script),
-- is now in µs from the client's clock; without it Redis TIME is read. On Redis TIME, the default,
-- a call has one argument fewer: each one costs Redis about 1,000 instructions.
-- Expiries count from `expiry_from` with PX / PEXPIRE on a client's clock (0: from Redis' own
-- now), and are absolute (PXAT / PEXPIREAT) on Redis TIME (why: `expiry_from_us` in the prelude).
-- A script written with `time_deferred` true (see fixed_window.lua's and gcra.lua's one-limit
-- sections, and a rule of marked fixed windows) reads TIME itself, only when it must: `now` is
-- then nil until it does.
local now = ARGV[now_at] and tonumber(ARGV[now_at])
local px, pexpire, expiry_from = 'PX', 'PEXPIRE', 0
if not now and not time_deferred then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
  px, pexpire, expiry_from = 'PXAT', 'PEXPIREAT', now
end
