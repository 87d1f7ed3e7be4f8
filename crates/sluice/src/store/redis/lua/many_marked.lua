-- many_marked: a fixed-window limit's count in its marked window, in a rule script whose limits
-- are all fixed windows that one_fixed_window.lua would mark, none with a block or a penalty (see
-- many_head.lua). On Redis TIME such a rule is decided first without the time, as
-- one_fixed_window.lua decides one limit: each limit in turn, while every one before it was
-- counted in its marked window or starts one and admits (`all`), counts with DECRBY. A count that
-- is this window's and admits reads its PTTL into ttl_@; a DECRBY that made the key (it answers
-- -cost: a stored count is never 0) starts a window, ttl_@ -1 and `fresh` set; ttl_@ stays 0
-- otherwise. When every limit's ttl is set, the new windows' keys are completed as
-- one_fixed_window.lua completes a window's first admission (the lines after the fresh marker,
-- once TIME is read: the slot added to the count, the key to expire at the window's end), and
-- the script answers { value, ttl } per limit, two values a limit, which no other answer has: a
-- new window's value and ttl are what its key now holds and its PTTL would say (the expiry less
-- Redis' millisecond).
-- Otherwise each count made is undone (the lines after the undo marker: INCRBY, or DEL for a key
-- the DECRBY made), TIME is read, and the rule is decided as many_head.lua says, on the keys as
-- they were.

local r_@, ttl_@ = nil, 0
if all then
  r_@ = redis.pcall('DECRBY', key_@, cost_text_@)
  if type(r_@) == 'number' then
    local m = -r_@
    local count = m % 33554432
    if m >= 33554432 then
      if count > 0 and count <= limit_@ then
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
--@fresh
if ttl_@ < 0 then
  local idx = math.floor(now / window_@)
  if idx * window_@ > now then
    idx = idx - 1
  elseif (idx + 1) * window_@ <= now then
    idx = idx + 1
  end
  local ms = math.ceil((idx + 1) * window_@ / 1000)
  local slot = (idx % 268435455 + 1) * 33554432
  if cost_@ <= 16777216 then
    -- The DECRBY made the key: its slot and an expiry complete it, for less than a SET.
    r_@ = r_@ - slot
    redis.call('DECRBY', key_@, string.format('%d', slot))
    redis.call('PEXPIREAT', key_@, string.format('%d', ms))
  else
    r_@ = -(slot + 16777216)
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
