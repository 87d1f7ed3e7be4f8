-- fixed_window: restates algorithm/fixed_window.rs as look and record. (A one-limit rule counts
-- with one native DECRBY instead: see one_fixed_window.lua.)
--
-- KEY: one negative integer, -(slot * 2^25 + count), so Redis keeps it in the key's object and
-- DECRBY adds to the count. `slot` is the window's index modulo 2^28 - 1, plus 1 (never 0: a
-- missing key decrements to a slot-0 value, read as another window); the count is capped at
-- COUNT_CAP < 2^25, so the whole stays below 2^53. A key outlives its window by at most 1 ms
-- (its expiry), so a slot is never mistaken for one 2^28 - 1 windows later.
-- Flagged: slot * 2^25 + (2^25 - 1 - count), positive, which DECRBY counts up as well, holds the
-- count of an identity whose penalty has violations (decide.lua flags its key when it counts one;
-- a window starts flagged while they are remembered). An unflagged count of a penalized limit
-- thus tells that there are none, and a one-limit script need not read the violations key
-- (one_fixed_window.lua). Every script that reads a count reads both forms, and keeps the flag.
-- A GCRA tat, which a named limit whose algorithm changed may leave, reads as a flagged value of
-- some other window (the TIME path starts this window afresh); counted in a marked window
-- without TIME, it passes only if its low 25 bits happen to read as a count within the limit
-- (one chance in 2^25 / limit), and then only until that count passes the limit or the key expires.

local FW_M = 33554432
local FW_SLOTS = 268435455

-- The slot and count of `raw` (a stored value; slot 0 for anything else), and whether it is
-- flagged.
local function fixed_window_held(raw)
  local v = tonumber(raw)
  if not v then
    return 0, 0, false
  end
  if v > 0 then
    local s = idiv(v, FW_M)
    return s, FW_M - 1 - (v - s * FW_M), true
  end
  local s = idiv(-v, FW_M)
  return s, -v - s * FW_M, false
end

-- A count as stored: flagged or not.
local function fixed_window_value(slot, count, flagged)
  if flagged then
    return int(slot * FW_M + FW_M - 1 - count)
  end
  return int(-(slot * FW_M + count))
end

-- Flags the count in `key`, if it holds one that is not (a violation was just counted).
local function fixed_window_flag(key)
  local raw = redis.pcall('GET', key)
  local slot, count, flagged = fixed_window_held(raw)
  if slot > 0 and not flagged then
    redis.call('SET', key, fixed_window_value(slot, count, true), 'KEEPTTL')
  end
end

local function fixed_window_slot(now, p)
  local idx = idiv(now, p.window)
  return idx * p.window, idx - idiv(idx, FW_SLOTS) * FW_SLOTS + 1
end

local function fixed_window_fill(o, now, p)
  local window_left = o.start + p.window - now
  o.remaining = math.max(p.count - o.count, 0)
  o.reset = 0
  if o.count > 0 then
    o.reset = window_left
  end
  if not o.allowed then
    o.retry = window_left
  end
end

local function fixed_window_look(key, now, p, cost)
  local raw = read_state(key)
  if not tonumber(raw) and is_marker(raw) then
    return nil, marker_until(raw)
  end
  local start, slot = fixed_window_slot(now, p)
  local s, count, flagged = fixed_window_held(raw)
  if s ~= slot then
    count, flagged = 0, false
  end
  local o = { allowed = count + cost <= p.count, delay = 0, start = start, slot = slot,
              count = count, flagged = flagged }
  fixed_window_fill(o, now, p)
  return o
end

-- The count is flagged as it was, or when the window starts while the decision's violations
-- (o.violations, decide.lua) are remembered.
local function fixed_window_record(key, now, p, cost, o)
  o.count = math.min(o.count + cost, COUNT_CAP)
  fixed_window_fill(o, now, p)
  local flagged = o.flagged or (o.violations or 0) > 0
  redis.call('SET', key, fixed_window_value(o.slot, o.count, flagged), expiry(o.reset))
end
