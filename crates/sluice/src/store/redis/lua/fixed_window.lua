-- fixed_window: restates algorithm/fixed_window.rs as look and record. (A one-limit rule counts
-- with one native DECRBY instead: see one_fixed_window.lua.)
--
-- KEY: one negative integer, -(slot * 2^25 + count), so Redis keeps it in the key's object and
-- DECRBY adds to the count. `slot` is the window's index modulo 2^28 - 1, plus 1 (never 0: a
-- missing key decrements to a slot-0 value, read as another window); the count is capped at
-- COUNT_CAP < 2^25, so the whole stays below 2^53. A key outlives its window by at most 1 ms
-- (its expiry), so a slot is never mistaken for one 2^28 - 1 windows later.

local FW_M = 33554432
local FW_SLOTS = 268435455

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

-- The count of `raw` (a stored value) if it belongs to `slot`, else 0.
local function fixed_window_count(raw, slot)
  local m = -(tonumber(raw) or 1)
  if m < 0 then
    return 0
  end
  local s = idiv(m, FW_M)
  if s ~= slot then
    return 0
  end
  return m - s * FW_M
end

local function fixed_window_look(key, now, p, cost)
  local raw = read_state(key)
  if not tonumber(raw) and is_marker(raw) then
    return nil, marker_until(raw)
  end
  local start, slot = fixed_window_slot(now, p)
  local count = fixed_window_count(raw, slot)
  local o = { allowed = count + cost <= p.count, delay = 0, start = start, slot = slot,
              count = count }
  fixed_window_fill(o, now, p)
  return o
end

local function fixed_window_record(key, now, p, cost, o)
  o.count = math.min(o.count + cost, COUNT_CAP)
  fixed_window_fill(o, now, p)
  redis.call('SET', key, int(-(o.slot * FW_M + o.count)), expiry(o.reset))
end
