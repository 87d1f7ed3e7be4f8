-- quota: one quota limit alone (a fixed window whose window is a calendar period: see
-- fixed_window.lua and algorithm/fixed_window.rs, which it restates), without the general
-- decision's definitions: every function a script defines costs Redis time on every call. It
-- counts with one DECRBY, in the key format fixed_window.lua reads, so the general decision and
-- this script share a quota's key; anything it does not read (a block marker, a count flagged
-- by a penalty, a count past COUNT_CAP, another period's count) is undone and left to the
-- general decision ({}).
--
-- KEYS[1]: the state key, -(slot * FIXED_WINDOW_M + count); the slot is the period's first hour.
-- ARGV[1]: cost. ARGV[2]: the quota. ARGV[3], ARGV[4]: the period the caller holds for now,
--   [start, end) in µs. ARGV[5]: '1' when the quota admits past itself (`over: allow`).
-- ARGV[6] (only on a client's clock): now in µs; ARGV[7]: the shortest expiry to write, µs.
-- Returns: { now } alone, having changed nothing, when now is outside the period sent; {} as
-- said above; else the one-limit answer { now, allowed, remaining, reset_us, retry_us (-1: none),
-- 0, 0 } (codec.rs).

local key = KEYS[1]
local cost = tonumber(ARGV[1])
local r = redis.pcall('DECRBY', key, ARGV[1])
if type(r) ~= 'number' then
  return {}
end
local function undo()
  if r == -cost then
    redis.call('DEL', key)
  else
    redis.call('INCRBY', key, ARGV[1])
  end
end
local now = tonumber(ARGV[6])
local px, expiry_from, min_ttl = 'PX', 0, tonumber(ARGV[7]) or 0
if not now then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
  px, expiry_from = 'PXAT', now
end
local start, finish = tonumber(ARGV[3]), tonumber(ARGV[4])
if now < start or now >= finish then
  undo()
  return { now }
end
local m = -r
local count = m % FIXED_WINDOW_M
local s = (m - count) / FIXED_WINDOW_M
local idx = math.floor(start / 3600000000)
local slot = idx % FIXED_WINDOW_SLOTS + 1
local left = finish - now
if r > 0 or count > COUNT_CAP or (s ~= slot and m ~= cost) then
  undo()
  return {}
end
if m == cost then
  -- The DECRBY made the key: its slot and the period's end complete it.
  redis.call('DECRBY', key, string.format('%d', slot * FIXED_WINDOW_M))
  local ms = math.ceil((expiry_from + math.max(left, min_ttl)) / 1000)
  redis.call(px == 'PXAT' and 'PEXPIREAT' or 'PEXPIRE', key, string.format('%d', ms))
end
local limit = tonumber(ARGV[2])
if count <= limit then
  return { now, 1, limit - count, left, -1, 0, 0 }
end
if ARGV[5] == '1' then
  -- Past the quota, admitted and counted: its own answer is a denial, which decides nothing.
  return { now, 0, 0, left, left, 0, 0 }
end
if m == cost then
  redis.call('DEL', key)
  return { now, 0, limit, 0, left, 0, 0 }
end
redis.call('INCRBY', key, ARGV[1])
count = count - cost
return { now, 0, math.max(limit - count, 0), left, left, 0, 0 }
