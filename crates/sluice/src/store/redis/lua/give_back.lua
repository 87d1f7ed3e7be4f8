-- give_back: returns the units a cross-slot request consumed on one slot before a limit on
-- another slot denied it (see store/redis/cross_slot.rs). Restates no algorithm: it undoes one
-- admission of each, never by more than the admission can still weigh, so no limit can admit more
-- than it allows.
--
-- KEYS[i]: the state key of limit i (all on one slot).
-- ARGV[1]: now in µs from the client's clock, or '' to read Redis TIME.
-- ARGV[2]: t0, the decision time (µs) the units were consumed at.
-- ARGV[3..]: GIVE_BACK_ARGS per limit: algorithm (codes as in decide.lua), count, window_us,
--   capacity, cost, period_start_us (a quota's period that held t0; '': none).
-- Returns the number of limits whose state changed.
--
-- Each algorithm gives back in its own source's `give_back` section (<name>.lua#give_back),
-- written in where `--@@give_back` stands below: `<name>_give_back(key, kind, p, cost)`, with
-- `kind` the key's TYPE, using now, t0, elapsed and set_or_del; it adds to `changed` what it
-- changed. GIVE_BACKS lists them by code (false: nothing to give back, a lease).
--
-- Counting states (sliding_log, sliding_window, fixed_window) lose exactly the consumed units:
-- the log's request recorded at t0 (the newest one of those units: removing the newest request of
-- the log restores it exactly, an older one leaves its units counted until they leave the window,
-- which errs on the side of denying), the window bucket or window of t0 (nothing once that window
-- is over). A state behind a block marker is left alone. Draining states (token_bucket, leaky_bucket,
-- gcra) lose the units minus what has drained since t0: an admission's weight on the level can
-- only shrink by draining, so the level never drops below what the other admissions hold.
-- Expiries are kept (KEEPTTL): a state that matters for less time may live a little longer.

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

--@@give_back

for i = 1, #KEYS do
  local a = 3 + (i - 1) * GIVE_BACK_ARGS
  local give_back = GIVE_BACKS[tonumber(ARGV[a])]
  local p = { count = tonumber(ARGV[a + 1]), window = tonumber(ARGV[a + 2]),
              capacity = tonumber(ARGV[a + 3]), start = tonumber(ARGV[a + 5]) }
  if give_back then
    give_back(KEYS[i], redis.call('TYPE', KEYS[i]).ok, p, tonumber(ARGV[a + 4]))
  end
end

return changed
