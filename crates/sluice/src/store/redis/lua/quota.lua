-- quota: one quota limit alone (a fixed window whose window is a calendar period: see
-- fixed_window.lua and algorithm/fixed_window.rs, which it restates), without the general
-- decision's definitions: every function a script defines costs Redis time on every call. It
-- counts with one DECRBY, in the key format fixed_window.lua reads, so the general decision and
-- this script share a quota's key; anything it does not read (a block marker, a count flagged
-- by a penalty, a count past COUNT_CAP, another period's count) is undone and left to the
-- general decision ({}).
--
-- KEYS[1]: the state key, -(slot * FIXED_WINDOW_M + count); the slot is the period's first hour.
-- ARGV[1]: cost. ARGV[2]: the quota. ARGV[3]: the slot of the period the caller holds for now;
--   ARGV[4], ARGV[5]: that period, [start, end) in µs. ARGV[6]: '1' when the quota admits past
--   itself (`over: allow`). ARGV[7] (only on a client's clock): now in µs; ARGV[8]: the shortest
--   expiry to write, µs.
-- Returns, on Redis TIME, for a count in the key of the period sent (a key that ends with its
-- period, so Redis' time is in it): `<allowed> <count> <PTTL> <end>` without reading TIME
-- (codec/marked.rs, "A quota's answer"). Else { now } alone, having changed nothing, when now is
-- outside the period sent; {} as said above; or the one-limit answer { now, allowed, remaining,
-- reset_us, retry_us (-1: none), 0, 0 } (codec.rs).

local key = KEYS[1]
local r = redis.pcall('DECRBY', key, ARGV[1])
if type(r) ~= 'number' then
  return {}
end
local cost = tonumber(ARGV[1])
local m = -r
local count = m % FIXED_WINDOW_M
local s = (m - count) / FIXED_WINDOW_M
local slot = tonumber(ARGV[3])
local limit = tonumber(ARGV[2])
if not ARGV[7] and r < 0 and s == slot and count <= COUNT_CAP then
  local ttl = redis.call('PTTL', key)
  if ttl > 0 then
    if count <= limit then
      return string.format('1 %d %d ', count, ttl) .. ARGV[5]
    end
    if ARGV[6] == '1' then
      return string.format('0 %d %d ', count, ttl) .. ARGV[5]
    end
    redis.call('INCRBY', key, ARGV[1])
    return string.format('0 %d %d ', count - cost, ttl) .. ARGV[5]
  end
end
local function undo()
  if r == -cost then
    redis.call('DEL', key)
  else
    redis.call('INCRBY', key, ARGV[1])
  end
end
local now = tonumber(ARGV[7])
local px, expiry_from, min_ttl = 'PX', 0, tonumber(ARGV[8]) or 0
if not now then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
  px, expiry_from = 'PXAT', now
end
local start, finish = tonumber(ARGV[4]), tonumber(ARGV[5])
if now < start or now >= finish then
  undo()
  return { now }
end
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
if count <= limit then
  return { now, 1, limit - count, left, -1, 0, 0 }
end
if ARGV[6] == '1' then
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
