-- fixed_window: the algorithm's one Lua source; its sections are the forms of its scripts
-- (general, one, many, many_marked, give_back: store/redis/source.rs).
--@@general
-- fixed_window: restates algorithm/fixed_window.rs as look and record. (A one-limit rule counts
-- with one native DECRBY instead: see fixed_window.lua#one.)
--
-- KEY: one integer, -(slot * FIXED_WINDOW_M + count), or flagged while a penalty remembers violations: its
-- format, and why every script reads both forms, in `# Fixed window keys` in codec/marked.rs.

-- The slot and count of `raw` (a stored value; slot 0 for anything else), and whether it is
-- flagged.
local function fixed_window_held(raw)
  local v = tonumber(raw)
  if not v then
    return 0, 0, false
  end
  if v > 0 then
    local s = idiv(v, FIXED_WINDOW_M)
    return s, FIXED_WINDOW_M - 1 - (v - s * FIXED_WINDOW_M), true
  end
  local s = idiv(-v, FIXED_WINDOW_M)
  return s, -v - s * FIXED_WINDOW_M, false
end

-- A count as stored: flagged or not.
local function fixed_window_value(slot, count, flagged)
  if flagged then
    return int(slot * FIXED_WINDOW_M + FIXED_WINDOW_M - 1 - count)
  end
  return int(-(slot * FIXED_WINDOW_M + count))
end

-- Flags the count in `key`, if it holds one that is not (a violation was just counted).
local function fixed_window_flag(key)
  local raw = redis.pcall('GET', key)
  local slot, count, flagged = fixed_window_held(raw)
  if slot > 0 and not flagged then
    redis.call('SET', key, fixed_window_value(slot, count, true), 'KEEPTTL')
  end
end

-- The window that holds `now`: its start and slot. A quota's window is the period the caller
-- sent ([p.start, p.start + p.window), false when `now` is outside it), its slot the period's
-- first hour (no two periods share one: the shortest lasts 23 hours).
local function fixed_window_slot(now, p)
  if p.start then
    if now < p.start or now >= p.start + p.window then
      return false
    end
    local idx = idiv(p.start, PERIOD_SLOT_US)
    return p.start, idx - idiv(idx, FIXED_WINDOW_SLOTS) * FIXED_WINDOW_SLOTS + 1
  end
  local idx = idiv(now, p.window)
  return idx * p.window, idx - idiv(idx, FIXED_WINDOW_SLOTS) * FIXED_WINDOW_SLOTS + 1
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
  if not start then
    -- Not the quota's period: the caller asks again in the one that holds `now`.
    return { moved = true, allowed = false, delay = 0, remaining = 0, reset = 0 }
  end
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

--@@one
-- fixed_window#one: one fixed-window limit (see one_head.lua for a block or penalty), at the floor
-- of what Redis must do: one DECRBY while the window lasts (plus TIME, the slot's DECRBY and a
-- PEXPIREAT when a window starts). Restates fixed_window_look and _record, counting first and
-- undoing a denied count, without the prelude (every function a script defines costs Redis time
-- on every call), so it divides as idiv does, in exact doubles. Anything but a count in the key
-- returns {} and the caller decides with the general script instead. Marked windows, their
-- answers and a penalty's violations: `# The one-limit script's answers` in codec/marked.rs.
--
-- KEYS[1]: the state key, -(slot * 2^25 + count), or flagged (see fixed_window.lua).
-- ARGV and the reply: as one_head.lua says, or a marked answer (codec/marked.rs).

local key = KEYS[1]
local held, r, b1, b2
if guarded and (late or not warn_after or held_forget) then
  -- Read first (a refused DECRBY on a block marker costs three GETs; a penalty's marker holds
  -- the violations): see `# Reading first` in codec/marked.rs.
  held = redis.pcall('GET', key)
  if held and not held.err and (not late or #held > 17) then
    b1, b2 = string.byte(held, 1, 2)
  end
  if b1 ~= MARKER_BYTE then
    r = redis.pcall('DECRBY', key, cost_text)
  end
else
  r = redis.pcall('DECRBY', key, cost_text)
  if guarded and type(r) ~= 'number' then
    held = redis.pcall('GET', key)
    if type(held) == 'string' then
      b1, b2 = string.byte(held, 1, 2)
    end
  end
end
local counted = r and type(r) == 'number'
if not now then
  if b1 == MARKER_BYTE then
    if b2 == AT_END_BYTE then
      -- A marker that expires with its block: 2 ms or more left prove the block in force and
      -- tell Redis' time (see `# The one-limit script's answers` in codec/marked.rs).
      local ttl = redis.call('PTTL', key)
      if ttl > 1 and not (late and #held <= 18) then
        -- string.format writes a number for about 1,100 instructions less than `..`.
        return string.format('%d', ttl) .. held
      end
    end
  elseif counted and r < 0 then
    -- Marked: a count of this window (a slot, which a new key's -cost lacks) that admits.
    local m = -r
    local count = m % FIXED_WINDOW_M
    if m >= FIXED_WINDOW_M and count > 0 and count <= limit then
      local ttl = redis.call('PTTL', key)
      if ttl > 0 and ttl * 1000 <= window then
        -- One number (codec/marked.rs, "The packed answer"): a table costs Redis more than the Lua that packs it.
        return (((m - count) / FIXED_WINDOW_M - 1) % packed_slots * (limit + 1) + count) * (window / 1000 + 1) + ttl
      end
    end
  elseif counted and late then
    -- A flagged count of this window that admits: with the violations key's count and end.
    local s = math.floor(r / FIXED_WINDOW_M)
    local count = FIXED_WINDOW_M - 1 - (r - s * FIXED_WINDOW_M)
    if s > 0 and count > 0 and count <= limit then
      local ttl = redis.call('PTTL', key)
      if ttl > 0 and ttl * 1000 <= window then
        local v = redis.call('GET', key .. VIOLATIONS)
        if v then
          held_violations, held_forget = string.match(v, '^(%d+):(%d+)$')
        end
        if held_forget then
          return { -(s * FIXED_WINDOW_M + count), ttl, held_violations, held_forget }
        end
        return ((s - 1) % packed_slots * (limit + 1) + count) * (window / 1000 + 1) + ttl
      end
    end
  end
  if late then
    -- The violations, which the key did not tell, as one_head.lua reads them.
    local v = redis.call('GET', key .. VIOLATIONS)
    if v then
      held_violations, held_forget = string.match(v, '^(%d+):(%d+)$')
    end
  end
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
  px, pexpire, expiry_from = 'PXAT', 'PEXPIREAT', now
  -- Restates one_head.lua's count of the violations, which needed the time.
  if held_forget and tonumber(held_forget) > now then
    violations = tonumber(held_violations)
    if violations > 0 and violations >= warn_after then
      warning = 1
    end
  end
end
if not counted then
  if guarded then
    return from_marker(held)
  end
  return {}
end

local floor = math.floor
local idx = floor(now / window)
if idx * window > now then
  idx = idx - 1
elseif (idx + 1) * window <= now then
  idx = idx + 1
end
local slot = idx % FIXED_WINDOW_SLOTS + 1
local left = (idx + 1) * window - now
-- The count of this window, whether it is flagged (see fixed_window.lua).
local count, flagged = 0, r > 0
local s = floor(math.abs(r) / FIXED_WINDOW_M)
if s == slot then
  count = math.abs(r) - s * FIXED_WINDOW_M
  if flagged then
    count = FIXED_WINDOW_M - 1 - count
  end
end
local allowed
if count == 0 then
  -- A new window (or a key that was missing or held another algorithm's count).
  allowed = cost <= limit
  if not allowed and guarded then
    -- Left to the general decision as it was: stored counts are never 0, so -cost was a miss.
    if r == -cost then
      redis.call('DEL', key)
    else
      redis.call('INCRBY', key, cost_text)
    end
    return {}
  end
  if allowed or count_denied then
    count = math.min(cost, COUNT_CAP)
    local ms = math.ceil((expiry_from + math.max(left, min_ttl)) / 1000)
    -- A window of an identity with violations is flagged (see fixed_window.lua).
    local flag = violations > 0
    if r == -count then
      -- The DECRBY made the key (a stored count is never 0): its slot and an expiry complete
      -- it, which costs Redis less than a SET with PXAT.
      if flag then
        redis.call('INCRBY', key, string.format('%d', slot * FIXED_WINDOW_M + FIXED_WINDOW_M - 1))
      else
        redis.call('DECRBY', key, string.format('%d', slot * FIXED_WINDOW_M))
      end
      redis.call(pexpire, key, string.format('%d', ms))
    else
      local value = -(slot * FIXED_WINDOW_M + count)
      if flag then
        value = slot * FIXED_WINDOW_M + FIXED_WINDOW_M - 1 - count
      end
      redis.call('SET', key, string.format('%d', value), px, string.format('%d', ms))
    end
    if allowed and count > 0 and packed_slots and px == 'PXAT' and not held_forget then
      -- A window's first admission answers as the marked ones after it: the key's PTTL is its
      -- expiry less Redis' millisecond. One number costs Redis less than the table below.
      return ((slot - 1) % packed_slots * (limit + 1) + count) * (window / 1000 + 1) + ms - floor(now / 1000)
    end
  else
    redis.call('DEL', key)
  end
else
  allowed = count <= limit
  if not allowed and guarded then
    redis.call('INCRBY', key, cost_text)
    return {}
  end
  if not allowed then
    local keep = count - cost
    if count_denied then
      keep = math.min(count, COUNT_CAP)
    end
    if keep ~= count then
      redis.call('INCRBY', key, count - keep)
    end
    count = keep
  end
end
local reset = 0
if count > 0 then
  reset = left
end
if allowed then
  return { now, 1, math.max(limit - count, 0), reset, -1, violations, warning }
end
return { now, 0, math.max(limit - count, 0), reset, left, violations, warning }

--@@many
-- fixed_window#many: a fixed-window limit's part of a rule script (see many_head.lua), as
-- fixed_window.lua#one, but reading first (GET): nothing may be written before every limit has
-- looked. KEY: as the general form's, a flag kept and a new window flagged while the limit's
-- violations are remembered. A quota's window is its period, written in as start_@, finish_@
-- and period_slot_@ (start_@ is false for a plain fixed window).

local raw_@ = redis.pcall('GET', key_@)
local m_@ = tonumber(raw_@)
if raw_@ and not m_@ then
  return {}
end
local slot_@, left_@
if start_@ then
  -- A quota: its window is the period written in (many_script.rs), and a decision in another
  -- period is the general decision's, which chooses it by Redis' time.
  if now < start_@ or now >= finish_@ then
    return {}
  end
  slot_@, left_@ = period_slot_@, finish_@ - now
else
  local idx = math.floor(now / window_@)
  if idx * window_@ > now then
    idx = idx - 1
  elseif (idx + 1) * window_@ <= now then
    idx = idx + 1
  end
  slot_@, left_@ = idx % FIXED_WINDOW_SLOTS + 1, (idx + 1) * window_@ - now
end
local count_@, flagged_@ = 0, false
if m_@ and m_@ < 0 then
  local s = math.floor(-m_@ / FIXED_WINDOW_M)
  if s == slot_@ then
    count_@ = -m_@ - s * FIXED_WINDOW_M
  end
elseif m_@ then
  local s = math.floor(m_@ / FIXED_WINDOW_M)
  if s == slot_@ then
    count_@, flagged_@ = (FIXED_WINDOW_M - 1) - (m_@ - s * FIXED_WINDOW_M), true
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
if count_@ == 0 or count_@ + cost_@ > COUNT_CAP then
  count_@ = math.min(count_@ + cost_@, COUNT_CAP)
  local value = -(slot_@ * FIXED_WINDOW_M + count_@)
  if flagged_@ or violations_@ > 0 then
    value = slot_@ * FIXED_WINDOW_M + (FIXED_WINDOW_M - 1) - count_@
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

--@@many_marked
-- fixed_window#many_marked: a fixed-window limit's count in its marked window, in a rule script
-- whose limits are all fixed windows that fixed_window.lua#one would mark, or quotas (their
-- window the period written in): see `# A rule's fixed windows in their marked windows` in
-- codec/marked.rs.

local r_@, ttl_@ = nil, 0
if all then
  r_@ = redis.pcall('DECRBY', key_@, cost_text_@)
  if type(r_@) == 'number' then
    local m = -r_@
    local count = m % FIXED_WINDOW_M
    if m >= FIXED_WINDOW_M then
      -- A quota's key marks its period by its slot as well as its expiry (a key the period's
      -- zone or anchor no longer gives is left to the general decision).
      if count > 0 and count <= limit_@ and (not start_@ or m - count == period_slot_@ * FIXED_WINDOW_M) then
        ttl_@ = redis.call('PTTL', key_@)
        if ttl_@ * 1000 > window_@ then
          ttl_@ = 0
        end
      end
    elseif m == cost_@ and m > 0 and m <= limit_@ then
      ttl_@, fresh = -1, true
    end
  end
  all = ttl_@ ~= 0
end
--@period
if ttl_@ < 0 and start_@ and (now < start_@ or now >= finish_@) then
  -- A quota's new count in another period than the one written in: undone, for the general
  -- decision.
  all = false
end
--@fresh
if ttl_@ < 0 then
  local ms, slot
  if start_@ then
    ms, slot = math.ceil(finish_@ / 1000), period_slot_@ * FIXED_WINDOW_M
  else
    local idx = math.floor(now / window_@)
    if idx * window_@ > now then
      idx = idx - 1
    elseif (idx + 1) * window_@ <= now then
      idx = idx + 1
    end
    ms = math.ceil((idx + 1) * window_@ / 1000)
    slot = (idx % FIXED_WINDOW_SLOTS + 1) * FIXED_WINDOW_M
  end
  if cost_@ <= COUNT_CAP then
    -- The DECRBY made the key: its slot and an expiry complete it, for less than a SET.
    r_@ = r_@ - slot
    redis.call('DECRBY', key_@, string.format('%d', slot))
    redis.call('PEXPIREAT', key_@, string.format('%d', ms))
  else
    r_@ = -(slot + COUNT_CAP)
    redis.call('SET', key_@, string.format('%d', r_@), 'PXAT', string.format('%d', ms))
  end
  ttl_@ = ms - math.floor(now / 1000)
end
--@undo
if type(r_@) == 'number' then
  if r_@ == -cost_@ then
    redis.call('DEL', key_@)
  else
    redis.call('INCRBY', key_@, cost_text_@)
  end
end

--@@give_back
-- fixed_window#give_back: gives back one cross-slot admission's units (see lua/give_back.lua).
local function fixed_window_give_back(key, kind, p, cost)
  if kind ~= 'string' then
    return
  end
  -- A quota's window is its period that held t0 (see fixed_window_slot).
  local idx = idiv(p.start or t0, p.start and PERIOD_SLOT_US or p.window)
  local slot = idx - idiv(idx, FIXED_WINDOW_SLOTS) * FIXED_WINDOW_SLOTS + 1
  local s, count, flagged = fixed_window_held(redis.call('GET', key))
  if s == slot then
    local left = math.max(count - cost, 0)
    set_or_del(key, fixed_window_value(slot, left, flagged), left > 0)
  end
end
