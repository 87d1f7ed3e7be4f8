-- block: blocks one identity of a limit from now for a duration, never shortening a longer block
-- (algorithm/block.rs State::impose): parks the state behind a block marker (see the prelude)
-- and records the block's end in the block key, which listings read.
--
-- KEYS[1]: the state key. KEYS[2]: the block key (string: block end µs).
-- ARGV[1]: now in µs from the client's clock, or '' to read Redis TIME. ARGV[2]: duration µs.
-- ARGV[3]: the shortest expiry to write, µs (see RedisOptions::min_ttl).
-- Returns: the block's end (µs since the epoch).

local now = read_now(ARGV[1])
min_ttl_us = tonumber(ARGV[3])
local until_us = now + tonumber(ARGV[2])
local held = tonumber(redis.call('GET', KEYS[2]) or '') or 0
if held > until_us then
  until_us = held
end
until_us = park(KEYS[1], until_us, now)
redis.call('SET', KEYS[2], int(until_us), expiry(until_us - now))
return until_us
