-- many_marked: a fixed-window limit's count in its marked window, in a rule script whose limits
-- are all fixed windows that one_fixed_window.lua would mark, none with a block or a penalty (see
-- many_head.lua). On Redis TIME such a rule is decided first without the time, as
-- one_fixed_window.lua decides one limit: each limit in turn, while every one before it was
-- counted in its marked window and admits (`all`), counts with DECRBY and, when the count is this
-- window's and admits, reads its PTTL (ttl_@ stays 0 otherwise). When every limit's ttl is set,
-- the script answers { value, ttl } per limit, two values a limit, which no other answer has.
-- Otherwise each count made is undone (the lines after the undo marker: INCRBY, or DEL for a key
-- the DECRBY made, since a stored count is never 0), TIME is read, and the rule is decided as
-- many_head.lua says, on the keys as they were.

local r_@, ttl_@ = nil, 0
if all then
  r_@ = redis.pcall('DECRBY', key_@, cost_text_@)
  if type(r_@) == 'number' then
    local m = -r_@
    local count = m % 33554432
    if m >= 33554432 and count > 0 and count <= limit_@ then
      ttl_@ = redis.call('PTTL', key_@)
      if ttl_@ * 1000 > window_@ then
        ttl_@ = 0
      end
    end
  end
  all = ttl_@ > 0
end
--@undo
if type(r_@) == 'number' then
  if r_@ == -cost_@ then
    redis.call('DEL', key_@)
  else
    redis.call('INCRBY', key_@, cost_text_@)
  end
end
