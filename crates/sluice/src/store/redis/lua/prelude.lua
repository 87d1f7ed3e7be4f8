-- Sluice scripts, shared prelude: integer and float helpers used by the algorithms and drivers.
--
-- Every Sluice script but the one-limit ones is idiv.lua and this prelude, followed by its own
-- parts (see store/redis/script.rs).
-- KEYS/ARGV/returns: none of its own; each driver documents its own.
-- Shared constants (COUNT_CAP, LEVEL_EPSILON, the key suffixes, the block marker…) are Rust's,
-- declared before every script that names them (store/redis/constants.rs).
-- Times are integer microseconds held in Lua numbers, exact below 2^53 (about 285 years of
-- microseconds since 1970). Numbers are never turned into strings with `..` or tostring (which
-- keep only 14 digits): integers go through int(), floats through float() ('%.17g' round-trips).

-- ceil(a / b) for non-negative integers (Rust's u64::div_ceil).
local function idiv_ceil(a, b)
  local q = idiv(a, b)
  if q * b < a then
    q = q + 1
  end
  return q
end

local function int(x)
  return string.format('%d', x)
end

local function float(x)
  return string.format('%.17g', x)
end

-- Params::time_to_drain: time for `units` to drain at the rate, rounded up to whole µs.
local function time_to_drain(units, p)
  local v = math.ceil(units * p.window / p.count)
  if v < 0 then
    v = 0
  end
  return v
end

-- Level::drained: the level at `now`; a clock that steps back drains nothing.
local function drained(level, last, now, p)
  local elapsed = now - last
  if elapsed < 0 then
    elapsed = 0
  end
  local v = level - elapsed * p.count / p.window
  if v < 0 then
    v = 0
  end
  return v
end

-- The shortest expiry written (µs); 0 in production. Drivers set it from their ARGV: a client
-- clock that runs slower than real time (a test's manual clock) needs keys to outlive it.
local min_ttl_us = 0

-- The Redis TIME the decision reads (read_now), or nil when the time is the client's. Keys are
-- then given an absolute expiry from it: Redis 7.0 adds a relative expiry to a cached clock that
-- can lag TIME by a millisecond or more, which ended keys before their state stopped mattering.
-- A client's clock is not Redis' own, so expiries stay relative to it.
local expiry_from_us = nil

-- Milliseconds for PEXPIRE / PX: whole, rounded up, so a key never expires while it matters.
local function px(ttl_us)
  return int(idiv_ceil(math.max(ttl_us, min_ttl_us), 1000))
end

-- The Unix time in ms, rounded up, at which a state that matters `ttl_us` from the TIME read ends.
local function pxat(ttl_us)
  return int(idiv_ceil(expiry_from_us + math.max(ttl_us, min_ttl_us), 1000))
end

-- The expiry arguments of SET for a state that matters `ttl_us` from now: PX, or PXAT on TIME.
local function expiry(ttl_us)
  if expiry_from_us then
    return 'PXAT', pxat(ttl_us)
  end
  return 'PX', px(ttl_us)
end

-- Expires a key `ttl_us` from now: PEXPIRE, or PEXPIREAT on TIME.
local function expire(key, ttl_us)
  if expiry_from_us then
    redis.call('PEXPIREAT', key, pxat(ttl_us))
  else
    redis.call('PEXPIRE', key, px(ttl_us))
  end
end

-- Keeps a key exactly as long as its state matters; deletes it when it no longer does.
local function keep(key, ttl_us)
  if ttl_us > 0 then
    expire(key, ttl_us)
  else
    redis.call('DEL', key)
  end
end

-- Writes a string state with its expiry, or deletes it when it no longer matters.
local function put(key, value, ttl_us)
  if ttl_us > 0 then
    redis.call('SET', key, value, expiry(ttl_us))
  else
    redis.call('DEL', key)
  end
end

-- One read of a state key kept for the look that follows: the decision's first step
-- (lua/blocked.lua) reads a one-limit request's state key for a block marker, and the look of a
-- string state takes that read instead of asking Redis again. The first read of that key consumes
-- it; the first step resets it on every call, so nothing carries over from one call to the next.
local kept_key, kept_raw = nil, nil

local function read_state(key)
  if key == kept_key then
    kept_key = nil
    return kept_raw
  end
  return redis.pcall('GET', key)
end

-- Reads a tagged string state. A missing key, another type, or another algorithm's tag (a named
-- limit whose algorithm changed) reads as no state, as the memory store discards it.
local function match_tagged(raw, pattern)
  if type(raw) ~= 'string' then
    return nil
  end
  return string.match(raw, pattern)
end

-- Block markers. A block (configured, a penalty's ban, or an administrative one) moves the state
-- aside to `<state key>:h` and leaves `B<end µs>` in the state key, so a decision notices it with
-- the read it makes anyway: no extra key is read while an identity is not blocked. A marker that
-- expires with its block, at its end rounded up to the millisecond (PXAT, on Redis TIME, when the
-- parked state ends first), is written `B0<end µs>`: its PTTL then tells Redis' time, and a
-- one-limit fixed window answers it without TIME (fixed_window.lua#one). Either reads as its end.
-- A marker written when a penalty counted a violation is followed by ` <count> <forgotten at µs>`,
-- a copy of its violations key: while the identity is blocked nothing counts a violation, so the
-- copy stays true, and a one-limit script answers from the marker alone.
local function is_marker(raw)
  return type(raw) == 'string' and string.byte(raw, 1) == MARKER_BYTE
end

local function marker_until(raw)
  return tonumber(string.match(raw, MARKER_END)) or 0
end

-- Reads a state the fast way failed to parse: a block marker (returns its end) or another
-- algorithm's state (returns nil: no state).
local function marker_of(key)
  local raw = redis.pcall('GET', key)
  if is_marker(raw) then
    return marker_until(raw)
  end
  return nil
end

-- Puts a parked state back once its block is over (or drops the marker when there was none).
local function unpark(key)
  if redis.call('EXISTS', key .. PARKED) == 1 then
    redis.call('RENAME', key .. PARKED, key)
  else
    redis.call('DEL', key)
  end
end

-- Blocks a state key until `until_us`: parks the state, leaves the marker, with `copy` of the
-- violations after it if given (a marker already there keeps its own). Never shortens a
-- longer block. The marker lives as long as the block or the parked state, whichever is longer.
-- Returns the block's end.
local function park(key, until_us, now, copy)
  local held = redis.pcall('GET', key)
  local ttl
  if is_marker(held) then
    until_us = math.max(until_us, marker_until(held))
    copy = copy or string.match(held, ' (.*)$')
    ttl = redis.call('PTTL', key .. PARKED)
  else
    ttl = redis.call('PTTL', key)
    if ttl == -2 then
      redis.call('DEL', key .. PARKED)
    else
      redis.call('RENAME', key, key .. PARKED)
    end
  end
  local tail = copy and ' ' .. copy or ''
  if ttl > tonumber(px(until_us - now)) then
    redis.call('SET', key, MARKER .. int(until_us) .. tail, 'PX', ttl)
  elseif expiry_from_us and until_us - now >= min_ttl_us then
    redis.call('SET', key, MARKER_AT_END .. int(until_us) .. tail, expiry(until_us - now))
  else
    redis.call('SET', key, MARKER .. int(until_us) .. tail, expiry(until_us - now))
  end
  return until_us
end

-- The answer of a blocked limit.
local function blocked(until_us, now)
  return { allowed = false, remaining = 0, reset = until_us - now, retry = until_us - now,
           delay = 0, blocked_until = until_us }
end

-- Looks at a limit's state with the algorithm's `look`, through a block marker: a block in force
-- answers alone; one that is over is lifted (on a peek, the parked state is read in place).
local function look_state(look, key, now, p, cost, peek)
  local o, until_us = look(key, now, p, cost)
  if o then
    return o
  end
  if until_us > now then
    return blocked(until_us, now)
  end
  if peek then
    return look(key .. PARKED, now, p, cost) or blocked(until_us, now)
  end
  unpark(key)
  return look(key, now, p, cost)
end

-- The decision time: ARGV value from the client's clock, or Redis TIME when empty (which keys'
-- expiries then count from, see expiry_from_us).
local function read_now(arg)
  if arg == nil or arg == '' then
    local t = redis.call('TIME')
    expiry_from_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
    return expiry_from_us
  end
  expiry_from_us = nil
  return tonumber(arg)
end

