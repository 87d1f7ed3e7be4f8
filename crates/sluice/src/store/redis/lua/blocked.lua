-- blocked: the decide script's first step, before the prelude defines anything: a request with
-- one limit whose identity is blocked is answered from the block marker alone. Restates
-- `look_state` ("a block in force answers alone", prelude.lua) and decide.lua's reply for it;
-- defining the prelude's and the algorithms' functions costs Redis more than this whole answer,
-- so a blocked identity costs Redis less than an admitted one. Anything else falls through.
--
-- KEYS/ARGV/returns: decide.lua's. With one limit ARGV has 4 + 12 values: ARGV[13] is its
-- warn_after ('' without a penalty) and KEYS[3] its violations key.

do
  local held = ARGV[17] == nil and redis.pcall('GET', KEYS[1])
  if type(held) == 'string' and string.byte(held, 1) == 66 then
    local until_us = tonumber(string.sub(held, 2)) or 0
    local now = tonumber(ARGV[1])
    if not now then
      local t = redis.call('TIME')
      now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    end
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
      return { now, 0, 0, until_us - now, until_us - now, 0, until_us, violations, warning }
    end
  end
end

