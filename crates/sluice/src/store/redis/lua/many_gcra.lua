-- many_gcra: a GCRA limit's part of a rule script (see many_head.lua): one_gcra.lua, split into
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
