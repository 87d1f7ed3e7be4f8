-- decide: one decision over the limits of a request; restates algorithm/step.rs. Used for
-- requests with several limits, peeks, and what a one-limit script leaves to it (a denial by a
-- limit with a block or penalty, a block that is over, a state it does not read). Each limit's
-- algorithm runs once: its look reads the state, and its record writes the request once all
-- limits are known to pass.
-- Block (a marker in the state key) -> looks -> all-or-nothing records -> violations -> blocks.
--
-- KEYS: per limit, its state key, then for a limit with a block or penalty its block key
--   (string: block end µs, kept for listings) and its violations key ("<count>:<forgotten at µs>").
-- ARGV[1]: now in µs from the client's clock, or '' to read Redis TIME.
-- ARGV[2]: the shortest expiry to write, µs (0 in production; see RedisOptions::min_ttl).
-- ARGV[3]: 'apply' or 'peek' (peek writes nothing).
-- ARGV[4]: the token an admitted request's leases are taken under on its concurrency limits
--   ('' when it takes none).
-- ARGV[5..]: ARGS_PER_LIMIT per limit: algorithm (its code, model::REGISTRY; negated for a
--   settable limit, whose identity's run-time numbers "<count> <capacity>[ <day>]" at
--   `<state key>:r`, same slot, replace count and capacity, "0 0 <day>" setting the billing day
--   alone; -(code + CODES_M * day) for a settable monthly quota whose period was computed from
--   the billing day `day` the caller assumed the identity keeps there, plain -code assuming it
--   keeps none), count, window_us, capacity, cost, count_denied (0/1),
--   shadow (0/1; 2: a quota that admits past itself, `over: allow`), block_us ('': none),
--   warn_after ('': no penalty), ban_after, ban_us,
--   memory_us, period_start_us ('': none; a quota's window is then its period, from it for
--   window_us).
-- Returns: { now_us } alone, writing nothing, when `now` is outside a quota's period (the caller
--   sends the period that holds it); { now_us, limit (1-based), day } alone, writing nothing,
--   when that settable limit's identity keeps another billing day than the one assumed (0:
--   none; the caller sends the period `day` gives: store/redis/anchors.rs);
--   else { now_us, then 8 per limit: allowed (0/1), remaining, reset_after_us,
--   retry_after_us (-1: none), violations, warning (0/1), delay_us, blocked_until_us (-1: none)
--   (the one-limit and rule scripts' 4 or 6 values, then these two: codec.rs),
--   then per settable limit, in order, the run-time count and capacity it decided with (0, 0:
--   none set; the billing day is the one assumed) }.


local now = read_now(ARGV[1])
min_ttl_us = tonumber(ARGV[2])
local peek = ARGV[3] == 'peek'
local lease = ARGV[4]

local function warns(violations, penalty)
  return violations > 0 and violations >= penalty.warn_after
end

local steps = {}
local results = {}
local pass = true
local k = 1
local a = 5
while ARGV[a] do
  local code = tonumber(ARGV[a])
  local runtime, day
  if code < 0 then
    -- Read in this same script: a change applies to the next decision, never halfway into one.
    code = -code
    if code > CODES_M then
      -- Small integers: `%` is exact, and cheaper than idiv.
      local low = code % CODES_M
      day, code = (code - low) / CODES_M, low
    end
    runtime = redis.call('GET', KEYS[k] .. RUNTIME) or ''
  end
  local step = {
    look = LOOKS[code],
    record = RECORDS[code],
    p = {
      count = tonumber(ARGV[a + 1]),
      window = tonumber(ARGV[a + 2]),
      capacity = tonumber(ARGV[a + 3]),
      count_denied = ARGV[a + 5] == '1',
      admits_over = ARGV[a + 6] == '2',
      lease = lease,
      start = tonumber(ARGV[a + 12]),
    },
    cost = tonumber(ARGV[a + 4]),
    shadow = ARGV[a + 6] ~= '0',
    block = tonumber(ARGV[a + 7]),
    state = KEYS[k],
    code = code,
    violations = 0,
  }
  k = k + 1
  if runtime then
    local count, capacity = string.match(runtime, '^(%d+) (%d+)$')
    local kept
    if not count and runtime ~= '' then
      -- Numbers with a billing day ("0 0 <day>": the day alone), matched second: most have none.
      count, capacity, kept = string.match(runtime, '^(%d+) (%d+) (%d+)$')
      kept = tonumber(kept)
      if count == '0' then
        count = nil
      end
    end
    if kept ~= day then
      -- The period sent is the assumed day's: another day is another period.
      return { now, #steps + 1, kept or 0 }
    end
    step.runtime = { 0, 0 }
    if count then
      step.p.count, step.p.capacity = tonumber(count), tonumber(capacity)
      step.runtime = { step.p.count, step.p.capacity }
    end
  end
  if ARGV[a + 8] ~= '' then
    step.penalty = {
      warn_after = tonumber(ARGV[a + 8]),
      ban_after = tonumber(ARGV[a + 9]),
      ban = tonumber(ARGV[a + 10]),
      memory = tonumber(ARGV[a + 11]),
    }
  end
  if step.block or step.penalty then
    step.block_key, step.violations_key = KEYS[k], KEYS[k + 1]
    k = k + 2
  end
  if step.penalty then
    local held = redis.call('GET', step.violations_key)
    if held then
      local count, forget = string.match(held, '^(%d+):(%d+)$')
      if forget and tonumber(forget) > now then
        step.violations = tonumber(count)
      end
    end
  end
  local r = look_state(step.look, step.state, now, step.p, step.cost, peek)
  if r.moved then
    return { now }
  end
  r.violations = step.violations
  r.warning = step.penalty ~= nil and warns(step.violations, step.penalty)
  if not r.allowed and not step.shadow then
    pass = false
  end
  steps[#steps + 1] = step
  results[#results + 1] = r
  a = a + ARGS_PER_LIMIT
end

if not peek then
  for i, step in ipairs(steps) do
    local r = results[i]
    if not r.blocked_until then
      local record
      -- A quota that admits past itself counts what passes, past the quota too.
      if r.allowed or step.p.admits_over then
        record = pass
      else
        record = step.p.count_denied
      end
      if record then
        step.record(step.state, now, step.p, step.cost, r)
      end
      if not r.allowed then
        local until_us, copy
        if step.penalty then
          local violations = step.violations + 1
          local forget = now + step.penalty.memory
          put(step.violations_key, int(violations) .. ':' .. int(forget), step.penalty.memory)
          if step.code == CODE_FIXED_WINDOW then
            fixed_window_flag(step.state)
          end
          copy = int(violations) .. ' ' .. int(forget)
          r.violations = violations
          r.warning = warns(violations, step.penalty)
          if violations >= step.penalty.ban_after then
            until_us = now + step.penalty.ban
          end
        end
        if step.block then
          until_us = math.max(until_us or 0, now + step.block)
        end
        if until_us then
          if until_us > now then
            until_us = park(step.state, until_us, now, copy)
            put(step.block_key, int(until_us), until_us - now)
          end
          r.blocked_until = until_us
          -- The request now waits for the block, whatever the algorithm said.
          r.retry = math.max(r.retry or 0, until_us - now)
        end
      end
    end
  end
end

local reply = { now }
for _, r in ipairs(results) do
  reply[#reply + 1] = r.allowed and 1 or 0
  reply[#reply + 1] = r.remaining
  reply[#reply + 1] = r.reset
  reply[#reply + 1] = r.retry or -1
  reply[#reply + 1] = r.violations
  reply[#reply + 1] = r.warning and 1 or 0
  reply[#reply + 1] = r.delay
  reply[#reply + 1] = r.blocked_until or -1
end
for _, step in ipairs(steps) do
  if step.runtime then
    reply[#reply + 1] = step.runtime[1]
    reply[#reply + 1] = step.runtime[2]
  end
end
return reply
