-- one_head: the opening of every one-limit script (<algorithm>.lua#one follows it), after
-- now.lua: the request's cost, and a block or penalty. It holds only what every one of them uses,
-- since each line runs on every call.
--
-- The script is written for one limit: the store puts the limit's constants before now.lua
-- (one_script::one_text), as `local min_ttl, limit, window, capacity, count_denied, guarded,
-- warn_after, time_deferred, packed_slots, now_at = ...`: the shortest expiry to write in µs
-- (see RedisOptions::min_ttl), count (units per window), window_us, capacity, count_denied,
-- guarded (the limit has a block or a penalty), the penalty's warn_after (nil: none),
-- time_deferred (true: the script reads TIME itself, only when it must: fixed_window.lua#one and
-- gcra.lua#one), packed_slots (a fixed window counted in marked windows: the modulus of its
-- packed answer, codec/marked.rs, "The packed answer"; else false) and now_at, 2 (see now.lua);
-- then the shared constants the script names (constants.rs). Only what changes from call to call
-- is an argument: each one costs Redis about 1,000 instructions, more than most lines of Lua here.
-- For the same reason, numbers given to a Redis command are written as text (the cost as
-- ARGV[1], '0' rather than 0): Lua turns a number into a string with sprintf.
--
-- ARGV: the cost, then now in µs from the client's clock (none: Redis TIME, and then no cost
--   either when it is 1).
-- KEYS[1]: the state key. With a penalty, the violations key is KEYS[1] .. VIOLATIONS (keys.rs), not an
--   argument, which would cost Redis about 1,500 instructions a call: "<count>:<forgotten at µs>".
--
-- A guarded limit is decided here unless a block or a penalty must act: a block in force is
-- answered from its marker (restating blocked.lua), and every answer carries the penalty's
-- violations; a block that is over (to be lifted) and every denial (which imposes the block and
-- counts the violation) return {}, and the general decision takes the request with the state as
-- it found it.
--
-- The scripts return { now_us, allowed (0/1), remaining, reset_after_us, retry_after_us (-1:
-- none), violations, warning (0/1) }; a block in force, one text (marker_answer.lua) that the
-- store reads as decide.lua's reply for one limit; or {}.
-- An unguarded limit's script leaves out violations and warning (always 0 there): one_text cuts
-- them from its text, since each value of a reply costs Redis about 1,000 instructions.

-- Reading a string as a number costs Redis about 1,400 instructions; comparing strings, which
-- Lua interns, costs next to nothing: the usual cost of 1 is read by comparison. On Redis TIME a
-- cost of 1 is not sent at all (an argument costs Redis about 600 instructions).
local cost_text = ARGV[1] or '1'
local cost = cost_text == '1' and 1 or tonumber(cost_text)
-- A guarded limit's penalty's violations, which every answer carries. The violations key's count
-- and end (held_violations, held_forget) count once the time is known: a marked script
-- (fixed_window.lua#one) may answer without it.
-- When the state key holds what the algorithm does not expect (each script reads the key its own
-- way, and reads it again with GET only then), a script returns `from_marker` of what it read:
-- one_script::one_text writes marker_answer.lua in that place, which answers the block in force,
-- or {} (a block that is over, or anything else). A function would cost Redis about 1,500
-- instructions on every call that defines it, used or not.
-- A marked fixed window (its packed_slots, the slots' modulus) with a penalty reads the
-- violations key itself, after its own key, which tells them in most cases (`late`,
-- fixed_window.lua#one). A call of a Lua function (type()) costs Redis about 600 instructions.
local violations, warning = 0, 0
local held_violations, held_forget
local late = warn_after and not now and packed_slots
if guarded then
  if warn_after and not late then
    local v = redis.call('GET', KEYS[1] .. VIOLATIONS)
    if v then
      held_violations, held_forget = string.match(v, '^(%d+):(%d+)$')
    end
    if now and held_forget and tonumber(held_forget) > now then
      violations = tonumber(held_violations)
    end
    if violations > 0 and violations >= warn_after then
      warning = 1
    end
  end
end
