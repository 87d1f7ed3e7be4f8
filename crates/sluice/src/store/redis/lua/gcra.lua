-- gcra: restates algorithm/gcra.rs as look (read once, decide, write nothing) and record.
--
-- KEY: the theoretical arrival time in µs (when the key is back to full), a plain integer so
-- Redis stores it in the key's object itself. Integer arithmetic throughout. Written only when a
-- request is admitted; it expires at the tat.

local function gcra_fill(o, now, after)
  o.reset = after - now
  -- A capacity lowered on a live key can leave the tat beyond now + tau: nothing remains then.
  o.remaining = 0
  if now + o.tau > after then
    o.remaining = idiv(now + o.tau - after, o.t)
  end
end

-- Returns the outcome, or nil and the block's end when the key holds a block marker.
local function gcra_look(key, now, p, cost)
  local raw = read_state(key)
  local tat = tonumber(raw)
  if not tat then
    if is_marker(raw) then
      return nil, marker_until(raw)
    end
    tat = 0
  end
  local t = idiv_ceil(p.window, p.count)
  local tau = p.capacity * t
  if tat < now then
    tat = now
  end
  local new_tat = tat + cost * t
  local o = { allowed = new_tat <= now + tau, delay = 0, t = t, tau = tau, new_tat = new_tat }
  if not o.allowed then
    o.retry = new_tat - tau - now
  end
  gcra_fill(o, now, tat)
  return o
end

-- Records an admitted request (a denial changes nothing).
local function gcra_record(key, now, p, cost, o)
  if o.allowed then
    redis.call('SET', key, int(o.new_tat), expiry(o.new_tat - now))
    gcra_fill(o, now, o.new_tat)
  end
end

