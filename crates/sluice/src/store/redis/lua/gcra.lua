-- gcra(key, now, p, cost, apply) -> outcome; restates algorithm/gcra.rs.
--
-- KEY: a string "g<tat µs>", the theoretical arrival time (when the key is back to full).
-- Integer arithmetic throughout. Written only when a request is admitted with apply; it expires
-- at the tat.

local function gcra(key, now, p, cost, apply)
  local t = idiv_ceil(p.window, p.limit)
  local tau = p.capacity * t
  local stored = get_tagged(key, '^g(%d+)$')
  local tat = 0
  if stored then
    tat = tonumber(stored)
  end
  if tat < now then
    tat = now
  end
  local new_tat = tat + cost * t
  local allowed = new_tat <= now + tau
  local retry = nil
  if not allowed then
    retry = new_tat - tau - now
  end
  -- What remains after this request: consumed only when applied (a peek reports the present).
  local after = tat
  if apply and allowed then
    after = new_tat
  end
  local reset = after - now
  if apply and allowed then
    put(key, 'g' .. int(new_tat), reset)
  end
  -- A capacity lowered on a live key can leave the tat beyond now + tau: nothing remains then.
  local remaining = 0
  if now + tau > after then
    remaining = idiv(now + tau - after, t)
  end
  return outcome(allowed, remaining, reset, retry, 0)
end

