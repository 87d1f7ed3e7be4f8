-- one_gcra: one GCRA limit without block or penalty, at the floor of what Redis must do (TIME,
-- GET, SET). Restates gcra_look and gcra_record (gcra.lua, algorithm/gcra.rs) without the
-- prelude: every function a script defines costs Redis time on every call. Anything but a plain
-- tat in the key (a block marker, another algorithm's state) returns {} and the caller decides
-- with the general script instead.
--
-- KEYS[1]: the state key (the tat in µs, a plain integer).
-- ARGV: now in µs from the client's clock ('' to read Redis TIME), the shortest expiry to write in
--   µs (see RedisOptions::min_ttl), count (units per window), window_us, capacity, cost.
-- Returns: { now_us, allowed (0/1), remaining, reset_after_us, retry_after_us (-1: none) }, or {}.

local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
end
local limit, window, capacity, cost = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]),
  tonumber(ARGV[6])
local raw = redis.pcall('GET', KEYS[1])
local tat = tonumber(raw)
if not tat then
  if raw then
    return {}
  end
  tat = 0
end

-- floor(a / b) for non-negative integers, exact where a / b rounds to an integer.
local function idiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

local t = idiv(window, limit)
if t * limit < window then
  t = t + 1
end
local tau = capacity * t
if tat < now then
  tat = now
end
local new_tat = tat + cost * t
local allowed = new_tat <= now + tau
local after = tat
if allowed then
  after = new_tat
  local ms = math.ceil(math.max(new_tat - now, tonumber(ARGV[2])) / 1000)
  redis.call('SET', KEYS[1], string.format('%d', new_tat), 'PX', ms)
end
local remaining = 0
if now + tau > after then
  remaining = idiv(now + tau - after, t)
end
if allowed then
  return { now, 1, remaining, after - now, -1 }
end
return { now, 0, remaining, after - now, new_tat - tau - now }
