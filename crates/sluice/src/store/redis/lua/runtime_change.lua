-- runtime_change: sets or removes an identity's run-time numbers (`<state key>:r`) on a monthly
-- quota, and when that moves its billing day, moves the count of its current period to the
-- period the new day gives, in this one script (both keys share the identity's slot), so no
-- decision sees the new day without the count. What Rust writes and decide.lua reads:
-- algorithm/runtime.rs. (Other limits' numbers are a plain SET or DEL: store/redis/runtime.rs.)
--
-- KEYS[1]: the state key (a fixed window's count, fixed_window.lua). KEYS[2]: `<state key>:r`.
-- ARGV[1]: now in µs from the client's clock, or '' to read Redis TIME.
-- ARGV[2]: the new stored numbers, or '' to remove them.
-- ARGV[3]: the billing day the caller assumed the identity has now; ARGV[4]: the limit's own.
-- ARGV[5], ARGV[6]: the start and end (µs) of the period the assumed day gives at the caller's
--   time; ARGV[7], ARGV[8]: those of the period the new day gives.
-- Returns: { 1 } when set, { removed (0/1) } when removing; { now_us, day } alone, changing
--   nothing, when the identity's day is not the one assumed or `now` is outside either period
--   (the caller asks again with `day`, at `now_us`).

local now = read_now(ARGV[1])
local day = tonumber(ARGV[4])
local held = redis.call('GET', KEYS[2])
if held then
  local own = string.match(held, '^%d+ %d+ (%d+)$')
  if own then
    day = tonumber(own)
  end
end
local from, from_end = tonumber(ARGV[5]), tonumber(ARGV[6])
local to, to_end = tonumber(ARGV[7]), tonumber(ARGV[8])
if day ~= tonumber(ARGV[3]) or now < from or now >= from_end or now < to or now >= to_end then
  return { now, day }
end
if from ~= to then
  -- A period's slot is its first hour's (fixed_window_slot).
  local function slot(start)
    local idx = idiv(start, PERIOD_SLOT_US)
    return idx - idiv(idx, FIXED_WINDOW_SLOTS) * FIXED_WINDOW_SLOTS + 1
  end
  local s, count, flagged = fixed_window_held(redis.call('GET', KEYS[1]))
  if count > 0 and s == slot(from) then
    redis.call('SET', KEYS[1], fixed_window_value(slot(to), count, flagged), expiry(to_end - now))
  end
end
if ARGV[2] == '' then
  return { redis.call('DEL', KEYS[2]) }
end
redis.call('SET', KEYS[2], ARGV[2])
return { 1 }
