-- quota: one quota limit alone (a fixed window whose window is a calendar period: see
-- fixed_window.lua and algorithm/fixed_window.rs, which it restates), without the general
-- decision's definitions: every function a script defines costs Redis time on every call. It
-- counts with one DECRBY, in the key format fixed_window.lua reads, so the general decision and
-- this script share a quota's key; anything it does not read (a block marker, a count flagged
-- by a penalty, a count past COUNT_CAP, another period's count) is undone and left to the
-- general decision ({}).
--
-- Written per quota and period (store/redis/quota.rs), as `local limit, over, slot, start,
-- finish, radix, packable, min_ttl = …`: the quota, whether it admits past itself (`over:
-- allow`), the slot of the period [start, finish) in µs that holds the caller's clock (its
-- first hour), the packed answer's radix and its largest count, the shortest expiry to write.
-- KEYS[1]: the state key, -(slot * FIXED_WINDOW_M + count).
-- ARGV[1]: the cost (1 when absent); ARGV[2] (only on a client's clock): now in µs.
-- Returns, on Redis TIME, for a count in the key of this period (a key that ends with its
-- period, so Redis' time is in it), without reading TIME: count * radix + PTTL, negated for a
-- denial (its count undone) (codec/marked.rs, `quota`). Else { now } alone,
-- having changed nothing, when now is outside the period; {} as said above; or the one-limit
-- answer { now, allowed, remaining, reset_us, retry_us (-1: none), 0, 0 } (codec.rs).

local key = KEYS[1]
local cost_text = ARGV[1] or '1'
local r = redis.pcall('DECRBY', key, cost_text)
if type(r) ~= 'number' then
  return {}
end
local m = -r
local count = m % FIXED_WINDOW_M
if not ARGV[2] and r < 0 and m - count == slot * FIXED_WINDOW_M and count <= packable then
  local ttl = redis.call('PTTL', key)
  if ttl > 0 then
    if count <= limit or over then
      return count * radix + ttl
    end
    redis.call('INCRBY', key, cost_text)
    return -((count - tonumber(cost_text)) * radix + ttl)
  end
end
local cost = tonumber(cost_text)
local function undo()
  if r == -cost then
    redis.call('DEL', key)
  else
    redis.call('INCRBY', key, cost_text)
  end
end
local now = tonumber(ARGV[2])
local px, expiry_from = 'PX', 0
if not now then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
  px, expiry_from = 'PXAT', now
end
if now < start or now >= finish then
  undo()
  return { now }
end
local left = finish - now
local s = (m - count) / FIXED_WINDOW_M
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
if over then
  -- Past the quota, admitted and counted: its own answer is a denial, which decides nothing.
  return { now, 0, 0, left, left, 0, 0 }
end
if m == cost then
  redis.call('DEL', key)
  return { now, 0, limit, 0, left, 0, 0 }
end
redis.call('INCRBY', key, cost_text)
count = count - cost
return { now, 0, math.max(limit - count, 0), left, left, 0, 0 }
