-- unblock: lifts a block or ban and forgets the violations of one identity of a limit.
--
-- KEYS[1]: the state key. KEYS[2]: the block key. KEYS[3]: the violations key.
-- ARGV[1]: now in µs from the client's clock, or '' to read Redis TIME.
-- Returns: 1 if a block or ban was in force, else 0.

local now = read_now(ARGV[1])
local held = tonumber(redis.call('GET', KEYS[2]) or '') or 0
local until_us = marker_of(KEYS[1])
if until_us then
  held = math.max(held, until_us)
  unpark(KEYS[1])
end
redis.call('DEL', KEYS[2], KEYS[3])
if held > now then
  return 1
end
return 0
