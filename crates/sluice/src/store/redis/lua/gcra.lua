-- gcra: the algorithm's one Lua source. Its sections (general, one, many, give_back, settle) are
-- the forms the Redis store generates its scripts from (store/redis/source.rs).

--@@general
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


--@@one
-- gcra#one: one GCRA limit (see one_head.lua for a block or penalty), at the floor of what Redis
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
  -- fixed_window.lua#one answers it: `<PTTL>B0<end>`, then with a penalty ` <count> <end>` of
  -- its violations (the marker's copy, after `B0` and the end's 16 digits, or the violations
  -- key's as read). Anything else reads TIME.
  local b1, b2 = string.byte(raw, 1, 2)
  if b1 == MARKER_BYTE and b2 == AT_END_BYTE then
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

--@@many
-- gcra#many: a GCRA limit's part of a rule script (see many_head.lua): gcra.lua#one, split into
-- its look (GET) and its record (SET).

local raw_@ = redis.pcall('GET', key_@)
local tat_@ = tonumber(raw_@)
if not tat_@ then
  if raw_@ then
    return {}
  end
  tat_@ = 0
end
local t_@ = idiv(window_@, limit_@)
if t_@ * limit_@ < window_@ then
  t_@ = t_@ + 1
end
local tau_@ = capacity_@ * t_@
if tat_@ < now then
  tat_@ = now
end
local new_tat_@ = tat_@ + cost_@ * t_@
local allowed_@ = new_tat_@ <= now + tau_@
local retry_@ = -1
if not allowed_@ then
  retry_@ = new_tat_@ - tau_@ - now
end
local reset_@, remaining_@ = tat_@ - now, 0
if now + tau_@ > tat_@ then
  remaining_@ = idiv(now + tau_@ - tat_@, t_@)
end
--@record
redis.call('SET', key_@, string.format('%d', new_tat_@), px,
  string.format('%d', math.ceil((expiry_from + math.max(new_tat_@ - now, min_ttl)) / 1000)))
reset_@, remaining_@ = new_tat_@ - now, 0
if now + tau_@ > new_tat_@ then
  remaining_@ = idiv(now + tau_@ - new_tat_@, t_@)
end

--@@give_back
-- gcra#give_back: gives back one cross-slot admission's units (see lua/give_back.lua).
local function gcra_give_back(key, kind, p, cost)
  local stored = kind == 'string' and tonumber(redis.call('GET', key))
  local back = cost * idiv_ceil(p.window, p.count) - elapsed
  if stored and back > 0 then
    local tat = stored - back
    set_or_del(key, int(tat), tat > now)
  end
end

--@@settle
-- gcra#settle: settles one reservation on the state read (see lua/settle.lua); returns the
-- state's new time to live.
local function gcra_settle(key, raw, p, actual, estimate, elapsed, now)
  local tat = 0
  if type(raw) == 'string' then
    tat = tonumber(raw) or 0
  end
  local t = idiv_ceil(p.window, p.count)
  tat = math.max(tat, now)
  tat = math.max(tat + math.max(actual * t - elapsed, 0) - math.max(estimate * t - elapsed, 0), now)
  local ttl = tat - now
  put(key, int(tat), ttl)
  return ttl
end
