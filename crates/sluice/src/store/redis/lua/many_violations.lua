-- many_violations: a penalized limit's violations and warning in a rule script (see
-- many_head.lua), as one_head.lua reads them for one limit: the count in its violations key
-- while it is remembered, and the warning from warn_after on. Written before the limit's look,
-- its violations_key_@ (a KEYS entry) and warn_after_@ replaced by many_script::many_text.
--
-- KEY: "<count>:<forgotten at µs>" (see decide.lua).

local violations_@, warning_@ = 0, 0
do
  local held = redis.call('GET', violations_key_@)
  if held then
    local count, forget = string.match(held, '^(%d+):(%d+)$')
    if forget and tonumber(forget) > now then
      violations_@ = tonumber(count)
    end
  end
  if violations_@ > 0 and violations_@ >= warn_after_@ then
    warning_@ = 1
  end
end
