-- one_gcra: one GCRA limit (see one_head.lua for a block or penalty), at the floor of what Redis
-- must do (TIME, GET, SET). Restates gcra_look and gcra_record (gcra.lua, algorithm/gcra.rs) after
-- one_head.lua and idiv.lua, without the prelude: every function a script defines costs Redis time
-- on every call. Anything but a plain tat in the key (a block marker, another algorithm's state)
-- returns {} and the caller decides with the general script instead.
--
-- Marked (a block or a penalty, on Redis TIME; see one_script::one_text): TIME is read after the
-- GET, so that a blocked identity costs a GET and a PTTL, as a fixed window's does, and the
-- violations read by one_head.lua count once the time is known.
--
-- KEYS[1]: the state key (the tat in µs, a plain integer).
-- ARGV, the limit's constants (and the violations key): as one_head.lua says.
-- Returns: as one_head.lua says.

local raw = redis.pcall('GET', KEYS[1])
local tat = tonumber(raw)
if not tat and guarded and not now and type(raw) == 'string' then
  -- Marked: a marker that expires with its block (`B0`, see the prelude) with 2 ms or more left
  -- proves the block in force and tells Redis' time by its PTTL, answered as
  -- one_fixed_window.lua answers it: `<PTTL>B0<end>`, then with a penalty ` <count> <end>` of
  -- its violations (the marker's copy, after `B0` and the end's 16 digits, or the violations
  -- key's as read). Anything else reads TIME.
  local b1, b2 = string.byte(raw, 1, 2)
  if b1 == 66 and b2 == 48 then
    local ttl = redis.call('PTTL', KEYS[1])
    if ttl > 1 then
      -- string.format writes a number for about 1,100 instructions less than `..`.
      local text = string.format('%d', ttl) .. raw
      if held_forget and #raw <= 18 then
        return text .. ' ' .. held_violations .. ' ' .. held_forget
      end
      return text
    end
  end
end
if not now then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
  px, expiry_from = 'PXAT', now
  -- Restates one_head.lua's count of the violations, which needed the time.
  if held_forget and tonumber(held_forget) > now then
    violations = tonumber(held_violations)
    if violations > 0 and violations >= warn_after then
      warning = 1
    end
  end
end
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
