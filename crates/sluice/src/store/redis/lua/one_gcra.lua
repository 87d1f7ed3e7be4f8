-- one_gcra: one GCRA limit (see one_head.lua for a block or penalty), at the floor of what Redis
-- must do (TIME, GET, SET). Restates gcra_look and gcra_record (gcra.lua, algorithm/gcra.rs) after
-- one_head.lua and idiv.lua, without the prelude: every function a script defines costs Redis time
-- on every call. Anything but a plain tat in the key (a block marker, another algorithm's state)
-- returns {} and the caller decides with the general script instead.
--
-- KEYS[1]: the state key (the tat in µs, a plain integer).
-- ARGV, the limit's constants (and KEYS[2]): as one_head.lua says.
-- Returns: as one_head.lua says.

local raw = redis.pcall('GET', KEYS[1])
local tat = tonumber(raw)
if not tat then
  if raw then
    if guarded then
      return from_marker(raw)
    end
    return {}
  end
  tat = 0
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
if not allowed and guarded then
  return {}
end
local after = tat
if allowed then
  after = new_tat
  local ms = math.ceil((expiry_from + math.max(new_tat - now, min_ttl)) / 1000)
  redis.call('SET', KEYS[1], string.format('%d', new_tat), px, string.format('%d', ms))
end
local remaining = 0
if now + tau > after then
  remaining = idiv(now + tau - after, t)
end
if allowed then
  return { now, 1, remaining, after - now, -1, violations, warning }
end
return { now, 0, remaining, after - now, new_tat - tau - now, violations, warning }
