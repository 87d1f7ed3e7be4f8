-- give_back: returns the units a cross-slot request consumed on one slot before a limit on
-- another slot denied it (see store/redis/cross_slot.rs). Restates no algorithm: it undoes one
-- admission of each, never by more than the admission can still weigh, so no limit can admit more
-- than it allows.
--
-- KEYS[i]: the state key of limit i (all on one slot).
-- ARGV[1]: now in µs from the client's clock, or '' to read Redis TIME.
-- ARGV[2]: t0, the decision time (µs) the units were consumed at.
-- ARGV[3..]: 5 per limit: algorithm (codes as in decide.lua), count, window_us, capacity, cost.
-- Returns the number of limits whose state changed.
--
-- Counting states (sliding_log, sliding_window, fixed_window) lose exactly the consumed units:
-- the log's request recorded at t0 (the newest one of those units: removing the newest request of
-- the log restores it exactly, an older one leaves its units counted until they leave the window,
-- which errs on the side of denying), the window bucket or window of t0 (nothing once that window
-- is over). A state behind a block marker is left alone. Draining states (token_bucket, leaky_bucket,
-- gcra) lose the units minus what has drained since t0: an admission's weight on the level can
-- only shrink by draining, so the level never drops below what the other admissions hold.
-- Expiries are kept (KEEPTTL): a state that matters for less time may live a little longer.

local GIVE_BACK_ARGS = 5

local now = read_now(ARGV[1])
local t0 = tonumber(ARGV[2])
local elapsed = math.max(now - t0, 0)
local changed = 0

local function set_or_del(key, value, keep_it)
  if keep_it then
    redis.call('SET', key, value, 'KEEPTTL')
  else
    redis.call('DEL', key)
  end
  changed = changed + 1
end

for i = 1, #KEYS do
  local a = 3 + (i - 1) * GIVE_BACK_ARGS
  local algorithm = tonumber(ARGV[a])
  local p = { count = tonumber(ARGV[a + 1]), window = tonumber(ARGV[a + 2]),
              capacity = tonumber(ARGV[a + 3]) }
  local cost = tonumber(ARGV[a + 4])
  local key = KEYS[i]
  local kind = redis.call('TYPE', key).ok
  if algorithm == 1 and kind == 'zset' then
    local units = int(math.min(cost, p.count))
    local recorded = redis.call('ZRANGEBYSCORE', key, int(t0), '+inf')
    for j = #recorded, 1, -1 do
      if string.match(recorded[j], ':(%d+)$') == units then
        redis.call('ZREM', key, recorded[j])
        if redis.call('ZCARD', key) == 0 then
          redis.call('DEL', key)
        end
        changed = changed + 1
        break
      end
    end
  elseif algorithm == 2 and kind == 'hash' then
    local g = math.max(idiv(p.window, 10), 1)
    local field = int(idiv(t0, g))
    local held = tonumber(redis.call('HGET', key, field))
    if held then
      if held > cost then
        redis.call('HSET', key, field, int(held - cost))
      else
        redis.call('HDEL', key, field)
        if redis.call('HLEN', key) == 0 then
          redis.call('DEL', key)
        end
      end
      changed = changed + 1
    end
  elseif algorithm == 3 and kind == 'string' then
    local idx = idiv(t0, p.window)
    local slot = idx - idiv(idx, 268435455) * 268435455 + 1
    local s, count, flagged = fixed_window_held(redis.call('GET', key))
    if s == slot then
      local left = math.max(count - cost, 0)
      set_or_del(key, fixed_window_value(slot, left, flagged), left > 0)
    end
  elseif algorithm == 4 or algorithm == 6 then
    local tag = 't'
    if algorithm == 6 then
      tag = 'l'
    end
    local l, t = match_tagged(redis.pcall('GET', key), '^' .. tag .. '([^:]+):(%d+)$')
    local back = cost - elapsed * p.count / p.window
    if l and back > 0 then
      local level = math.max(drained(tonumber(l), tonumber(t), now, p) - back, 0)
      set_or_del(key, tag .. float(level) .. ':' .. int(now), level > 0)
    end
  elseif algorithm == 5 then
    local stored = kind == 'string' and tonumber(redis.call('GET', key))
    local back = cost * idiv_ceil(p.window, p.count) - elapsed
    if stored and back > 0 then
      local tat = stored - back
      set_or_del(key, int(tat), tat > now)
    end
  end
end

return changed
