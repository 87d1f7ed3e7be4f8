-- fixed_window(key, now, p, cost, apply) -> outcome; restates algorithm/fixed_window.rs.
--
-- KEY: a string "f<window start µs>:<count>". A count of another window reads as zero. The key
-- expires at the end of its window. With apply == false nothing is written.

local function fixed_window(key, now, p, cost, apply)
  local start = idiv(now, p.window) * p.window
  local s, c = get_tagged(key, '^f(%d+):(%d+)$')
  local count = 0
  if s and tonumber(s) == start then
    count = tonumber(c)
  end
  local allowed = count + cost <= p.limit
  local recorded = apply and (allowed or p.count_denied)
  if recorded then
    count = count + cost
  end
  local window_left = start + p.window - now
  local reset = 0
  if count > 0 then
    reset = window_left
  end
  if recorded then
    put(key, 'f' .. int(start) .. ':' .. int(count), reset)
  end
  local retry = nil
  if not allowed then
    retry = window_left
  end
  return outcome(allowed, math.max(p.limit - count, 0), reset, retry, 0)
end

