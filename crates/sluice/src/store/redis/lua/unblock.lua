-- unblock: lifts a block or ban and forgets the violations of one identity of a limit.
--
-- KEYS[1]: the block key. KEYS[2]: the violations key.
-- ARGV[1]: now in µs from the client's clock, or '' to read Redis TIME.
-- Returns: 1 if a block or ban was in force, else 0.

local now = read_now(ARGV[1])
local held = tonumber(redis.call('GET', KEYS[1]) or '') or 0
redis.call('DEL', KEYS[1], KEYS[2])
if held > now then
  return 1
end
return 0
