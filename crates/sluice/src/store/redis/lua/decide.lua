-- decide: one decision over all the limits of a request; restates algorithm/step.rs.
-- Block check -> algorithms (look only) -> all-or-nothing commit -> violations -> block/ban.
--
-- KEYS: three per limit i (1-based): KEYS[3i-2] the algorithm's state, KEYS[3i-1] the block
--   (string: block end µs), KEYS[3i] the violations (string "<count>:<forgotten at µs>").
-- ARGV[1]: 'apply' or 'peek' (peek writes nothing).
-- ARGV[2]: now in µs from the client's clock, or '' to read Redis TIME.
-- ARGV[3]: the shortest expiry to write, µs (0 in production; see RedisOptions::min_ttl).
-- ARGV[4..]: 13 per limit: algorithm (1 sliding_log, 2 sliding_window, 3 fixed_window,
--   4 token_bucket, 5 gcra, 6 leaky_bucket), limit, window_us, capacity, count_denied (0/1),
--   cost, block_us ('': none), enforce (0: shadow), has_penalty (0/1), warn_after, ban_after,
--   ban_us, memory_us.
-- Returns: { now_us, then 8 per limit: allowed (0/1), remaining, reset_after_us,
--   retry_after_us (-1: none), delay_us, blocked_until_us (-1: none), violations, warning (0/1) }.

local ALGORITHMS = { sliding_log, sliding_window, fixed_window, token_bucket, gcra, leaky_bucket }
local ARGS_PER_LIMIT = 13

local peek = ARGV[1] == 'peek'
local now = read_now(ARGV[2])
min_ttl_us = tonumber(ARGV[3])
local n = #KEYS / 3

local function warns(violations, penalty)
  return violations > 0 and violations >= penalty.warn_after
end

-- First pass: look only.
local steps = {}
local results = {}
for i = 1, n do
  local a = 4 + (i - 1) * ARGS_PER_LIMIT
  local step = {
    algorithm = ALGORITHMS[tonumber(ARGV[a])],
    p = {
      limit = tonumber(ARGV[a + 1]),
      window = tonumber(ARGV[a + 2]),
      capacity = tonumber(ARGV[a + 3]),
      count_denied = ARGV[a + 4] == '1',
    },
    cost = tonumber(ARGV[a + 5]),
    block = tonumber(ARGV[a + 6]),
    enforce = ARGV[a + 7] == '1',
    state = KEYS[3 * i - 2],
    block_key = KEYS[3 * i - 1],
    violations_key = KEYS[3 * i],
  }
  if ARGV[a + 8] == '1' then
    step.penalty = {
      warn_after = tonumber(ARGV[a + 9]),
      ban_after = tonumber(ARGV[a + 10]),
      ban = tonumber(ARGV[a + 11]),
      memory = tonumber(ARGV[a + 12]),
    }
  end
  steps[i] = step

  local held = redis.call('MGET', step.block_key, step.violations_key)
  step.until_us = tonumber(held[1]) or 0
  step.violations = 0
  if held[2] then
    local count, forget = string.match(held[2], '^(%d+):(%d+)$')
    if forget and tonumber(forget) > now then
      step.violations = tonumber(count)
    end
  end
  local warning = step.penalty ~= nil and warns(step.violations, step.penalty)

  local r
  if step.until_us > now then
    -- Blocked: answered by the block alone.
    r = { allowed = false, remaining = 0, reset = step.until_us - now,
          retry = step.until_us - now, delay = 0, blocked = true }
    r.blocked_until = step.until_us
  else
    r = step.algorithm(step.state, now, step.p, step.cost, false)
  end
  r.violations = step.violations
  r.warning = warning
  results[i] = r
end

local pass = true
for i = 1, n do
  if not results[i].allowed and steps[i].enforce then
    pass = false
  end
end

-- Second pass: commit, then violations and blocks.
if not peek then
  for i = 1, n do
    local step, r = steps[i], results[i]
    if not r.blocked then
      local record
      if r.allowed then
        record = pass
      else
        record = step.p.count_denied
      end
      if record then
        local o = step.algorithm(step.state, now, step.p, step.cost, true)
        r.remaining, r.reset, r.retry, r.delay = o.remaining, o.reset, o.retry, o.delay
      end
      if not r.allowed then
        local until_us = step.until_us
        if step.penalty then
          local violations = step.violations + 1
          local forget = now + step.penalty.memory
          put(step.violations_key, int(violations) .. ':' .. int(forget), step.penalty.memory)
          r.violations = violations
          r.warning = warns(violations, step.penalty)
          if violations >= step.penalty.ban_after then
            until_us = math.max(until_us, now + step.penalty.ban)
            r.blocked_until = until_us
          end
        end
        if step.block then
          until_us = math.max(until_us, now + step.block)
          r.blocked_until = until_us
        end
        if r.blocked_until then
          if until_us > now then
            put(step.block_key, int(until_us), until_us - now)
          end
          -- The request now waits for the block, whatever the algorithm said.
          r.retry = math.max(r.retry or 0, until_us - now)
        end
      end
    end
  end
end

local reply = { now }
for i = 1, n do
  local r = results[i]
  reply[#reply + 1] = r.allowed and 1 or 0
  reply[#reply + 1] = r.remaining
  reply[#reply + 1] = r.reset
  reply[#reply + 1] = r.retry or -1
  reply[#reply + 1] = r.delay
  reply[#reply + 1] = r.blocked_until or -1
  reply[#reply + 1] = r.violations
  reply[#reply + 1] = r.warning and 1 or 0
end
return reply
