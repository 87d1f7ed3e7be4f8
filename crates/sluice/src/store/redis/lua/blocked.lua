-- blocked: the decision's first step: a request with one limit whose identity is blocked is
-- answered from the block marker alone. Restates `look_state` ("a block in force answers alone",
-- prelude.lua) and decide.lua's reply for it. Otherwise the read is kept for the look (see
-- `read_state` in the prelude), so a one-limit decision reads its state key once.
--
-- KEYS/ARGV/returns: decide.lua's. With one limit ARGV has 4 + 12 values: ARGV[13] is its
-- warn_after ('' without a penalty) and KEYS[3] its violations key.

kept_key = nil
if ARGV[17] == nil then
  local held = redis.pcall('GET', KEYS[1])
  if is_marker(held) then
    local until_us = marker_until(held)
    local now = read_now(ARGV[1])
    if until_us > now then
      local violations, warning = 0, 0
      if ARGV[13] ~= '' then
        local v = redis.call('GET', KEYS[3])
        local count, forget
        if v then
          count, forget = string.match(v, '^(%d+):(%d+)$')
        end
        if forget and tonumber(forget) > now then
          violations = tonumber(count)
        end
        if violations > 0 and violations >= tonumber(ARGV[13]) then
          warning = 1
        end
      end
      return { now, 0, 0, until_us - now, until_us - now, violations, warning, 0, until_us }
    end
  end
  kept_key, kept_raw = KEYS[1], held
end
