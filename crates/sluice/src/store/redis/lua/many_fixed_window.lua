-- many_fixed_window: a fixed-window limit's part of a rule script (see many_head.lua): restates
-- fixed_window_look and fixed_window_record (fixed_window.lua) as one_fixed_window.lua does, but
-- reads first (GET), since nothing may be written before every limit has looked; it then counts
-- with DECRBY while its window lasts, or writes the new window's count. It divides as
-- one_fixed_window.lua does, without calling idiv.
--
-- KEY: -(slot * 2^25 + count), or flagged (see fixed_window.lua): a flag is kept, and a new
-- window is flagged while the limit's violations are remembered.

local raw_@ = redis.pcall('GET', key_@)
local m_@ = tonumber(raw_@)
if raw_@ and not m_@ then
  return {}
end
local idx_@ = math.floor(now / window_@)
if idx_@ * window_@ > now then
  idx_@ = idx_@ - 1
elseif (idx_@ + 1) * window_@ <= now then
  idx_@ = idx_@ + 1
end
local slot_@ = idx_@ % 268435455 + 1
local left_@ = (idx_@ + 1) * window_@ - now
local count_@, flagged_@ = 0, false
if m_@ and m_@ < 0 then
  local s = math.floor(-m_@ / 33554432)
  if s == slot_@ then
    count_@ = -m_@ - s * 33554432
  end
elseif m_@ then
  local s = math.floor(m_@ / 33554432)
  if s == slot_@ then
    count_@, flagged_@ = 33554431 - (m_@ - s * 33554432), true
  end
end
local allowed_@ = count_@ + cost_@ <= limit_@
local retry_@ = -1
if not allowed_@ then
  retry_@ = left_@
end
local remaining_@ = math.max(limit_@ - count_@, 0)
local reset_@ = 0
if count_@ > 0 then
  reset_@ = left_@
end
--@record
if count_@ == 0 or count_@ + cost_@ > 16777216 then
  count_@ = math.min(count_@ + cost_@, 16777216)
  local value = -(slot_@ * 33554432 + count_@)
  if flagged_@ or violations_@ > 0 then
    value = slot_@ * 33554432 + 33554431 - count_@
  end
  redis.call('SET', key_@, string.format('%d', value), px,
    string.format('%d', math.ceil((expiry_from + math.max(left_@, min_ttl)) / 1000)))
else
  count_@ = count_@ + cost_@
  redis.call('DECRBY', key_@, cost_text_@)
end
remaining_@ = math.max(limit_@ - count_@, 0)
reset_@ = 0
if count_@ > 0 then
  reset_@ = left_@
end
