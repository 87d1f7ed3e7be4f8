-- one_fixed_window: one fixed-window limit (see one_head.lua for a block or penalty), at the floor
-- of what Redis must do: one DECRBY while the window lasts (plus TIME, the slot's DECRBY and a
-- PEXPIREAT when a window starts). Restates fixed_window_look and fixed_window_record
-- (fixed_window.lua, algorithm/fixed_window.rs), counting first and undoing a denied count,
-- after one_head.lua, without the prelude: every function a script defines costs Redis time on
-- every call, so it divides without idiv.lua: the window's index as idiv does (a quotient one ulp
-- off its integer is corrected); the slot (idx % SLOTS, idx below 2^53) and a count's slot (a
-- division by 2^25) are exact in doubles. Anything but a count in the key (a block marker,
-- another algorithm's state) returns {} and the caller decides with the general script instead.
--
-- Marked windows. On Redis TIME, a key holding a count expires at its window's end, rounded up to
-- the millisecond (PXAT, from TIME, as every script writes it). When that end is a whole
-- millisecond (a window of whole milliseconds) and nothing makes keys outlive their window (min_ttl
-- 0), the key's expiry marks its window: a PTTL of at least 1 ms means Redis' clock is still before
-- the window's end, and at or after its start, when the count was first written. An admission in
-- such a window needs no TIME, which costs Redis more than the DECRBY: the script is written with
-- `marked` (one_script::one_text; now.lua then leaves TIME to it). It answers one number,
-- ((slot - 1) % marked * (limit + 1) + count) * (window_ms + 1) + PTTL, below 2^53, `marked` being
-- the slots' modulus that one_text writes in (packed_reply.rs: a table costs Redis more than the
-- Lua that packs it); or, when a penalty's violations key is there, { the key's count (as an
-- unflagged value), its PTTL in ms, the violations' count and end as read }. Nothing else answers
-- one integer, nor four values but a block (below).
-- The store reads the count and the slot, finds the window from the slot and its own clock (any
-- clock within a day of Redis' finds the same one), and Redis' time from the window's end and the
-- PTTL, to the millisecond, raised within it to the latest time Redis reported to the store
-- (marked_reply::parse_marked_reply). A PTTL longer than the window (a key written for a longer
-- window) is not taken as a mark; a key written for a shorter one (a limit whose window was
-- changed) counts as this window's until it ends, as if the change had been made then.
-- A block marker that expires with its block (`B0`, see the prelude) is answered from its PTTL
-- too, as one value: `<PTTL>B0<end>`, then with a penalty ` <count> <end>` of its violations (the
-- marker's own copy, see the prelude, or the violations key's; each value of a table costs Redis
-- more than the text). A PTTL of 2 ms or more proves the block in force at Redis' time; at 1 ms
-- it may just have ended, and TIME decides. Everything else reads TIME and decides below.
-- A penalty's violations, in a marked script (`late`, see one_head.lua): the key is read first
-- (GET, then DECRBY), and the violations key only when the key does not tell the violations: a
-- count that is not flagged (see fixed_window.lua) has none, and a marker that holds their copy
-- tells them. So an identity without violations is admitted with a GET, a DECRBY and a PTTL, and
-- a blocked one answered with a GET and a PTTL, as without a penalty.
--
-- KEYS[1]: the state key, -(slot * 2^25 + count), or flagged (see fixed_window.lua).
-- ARGV, the limit's constants (and the violations key): as one_head.lua says.
-- Returns: as one_head.lua says, or the marked answer above.

local key = KEYS[1]
local held, r, b1, b2
if guarded and (late or not warn_after or held_forget) then
  -- A block without a penalty reads first: a refused DECRBY on a block marker costs Redis three
  -- times a GET. So does a penalty's limit: its marker holds the violations (see the prelude),
  -- and its count says whether the identity has any. On a client's clock (the head read the
  -- violations), only an identity with violations, the one a penalty bans, reads first.
  -- A GET refused on another type answers a table with `err` (a string has no such field). A
  -- count has 17 characters at most, a penalty's marker more: late, string.byte, which costs
  -- Redis a function call, reads only what may be a marker (a shorter one, which only an
  -- administrative block leaves, has the DECRBY refused and is answered below).
  held = redis.pcall('GET', key)
  if held and not held.err and (not late or #held > 17) then
    b1, b2 = string.byte(held, 1, 2)
  end
  if b1 ~= 66 then
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
local M, SLOTS, CAP = 33554432, 268435455, 16777216
if not now then
  if b1 == 66 then
    if b2 == 48 then
      -- A marker that expires with its block (see the prelude): 2 ms or more left prove the
      -- block in force, and tell Redis' time. A penalty's marker answers with the copy of its
      -- violations, after `B0` and the end's 16 digits (one without, which an administrative
      -- block leaves, reads TIME below).
      local ttl = redis.call('PTTL', key)
      if ttl > 1 and not (late and #held <= 18) then
        -- string.format writes a number for about 1,100 instructions less than `..`.
        return string.format('%d', ttl) .. held
      end
    end
  elseif counted and r < 0 then
    -- Marked: a count of this window (a slot, which a new key's -cost lacks) that admits.
    local m = -r
    local count = m % M
    if m >= M and count > 0 and count <= limit then
      local ttl = redis.call('PTTL', key)
      if ttl > 0 and ttl * 1000 <= window then
        -- One number (packed_reply.rs): a table costs Redis more than the Lua that packs it.
        return (((m - count) / M - 1) % marked * (limit + 1) + count) * (window / 1000 + 1) + ttl
      end
    end
  elseif counted and late then
    -- A flagged count of this window that admits: with the violations key's count and end.
    local s = math.floor(r / M)
    local count = M - 1 - (r - s * M)
    if s > 0 and count > 0 and count <= limit then
      local ttl = redis.call('PTTL', key)
      if ttl > 0 and ttl * 1000 <= window then
        local v = redis.call('GET', key .. ':v')
        if v then
          held_violations, held_forget = string.match(v, '^(%d+):(%d+)$')
        end
        if held_forget then
          return { -(s * M + count), ttl, held_violations, held_forget }
        end
        return ((s - 1) % marked * (limit + 1) + count) * (window / 1000 + 1) + ttl
      end
    end
  end
  if late then
    -- The violations, which the key did not tell, as one_head.lua reads them.
    local v = redis.call('GET', key .. ':v')
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
local slot = idx % SLOTS + 1
local left = (idx + 1) * window - now
-- The count of this window, whether it is flagged (see fixed_window.lua).
local count, flagged = 0, r > 0
local s = floor(math.abs(r) / M)
if s == slot then
  count = math.abs(r) - s * M
  if flagged then
    count = M - 1 - count
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
    count = math.min(cost, CAP)
    local ms = math.ceil((expiry_from + math.max(left, min_ttl)) / 1000)
    -- A window of an identity with violations is flagged (see fixed_window.lua).
    local flag = violations > 0
    if r == -count then
      -- The DECRBY made the key (a stored count is never 0): its slot and an expiry complete
      -- it, which costs Redis less than a SET with PXAT.
      if flag then
        redis.call('INCRBY', key, string.format('%d', slot * M + M - 1))
      else
        redis.call('DECRBY', key, string.format('%d', slot * M))
      end
      redis.call(pexpire, key, string.format('%d', ms))
    else
      local value = -(slot * M + count)
      if flag then
        value = slot * M + M - 1 - count
      end
      redis.call('SET', key, string.format('%d', value), px, string.format('%d', ms))
    end
    if allowed and count > 0 and marked and px == 'PXAT' and not held_forget then
      -- A window's first admission answers as the marked ones after it: the key's PTTL is its
      -- expiry less Redis' millisecond. One number costs Redis less than the table below.
      return ((slot - 1) % marked * (limit + 1) + count) * (window / 1000 + 1) + ms - floor(now / 1000)
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
      keep = math.min(count, CAP)
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
