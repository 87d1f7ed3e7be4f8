-- runtime_set: records an identity's run-time numbers in its limit's listing, within the bound.
-- Not prefixed by the prelude: it reads no time and no state.
--
-- KEYS[1]: the limit's listing (hash: escaped identity -> the stored numbers, algorithm/runtime.rs).
-- ARGV[1]: the escaped identity. ARGV[2]: the stored numbers. ARGV[3]: the most identities
--   the listing may hold.
-- Returns: 1 when recorded (new, or replacing the identity's own), 0 when the listing is full
--   of other identities (nothing changed).

if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0
  and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
