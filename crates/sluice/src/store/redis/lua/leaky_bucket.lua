-- leaky_bucket: the algorithm's one Lua source. Its sections (general, give_back) are the forms the
-- Redis store generates its scripts from (store/redis/source.rs).

--@@general
-- leaky_bucket: restates algorithm/leaky_bucket.rs as look and record, over token_bucket.lua's
-- draining level (the queue, rather than the units used): the same meter, which also tells an
-- admitted request how long to wait for the queue ahead of it.
--
-- KEY: a string "l<queue level, %.17g>:<last µs>". The level drains continuously and the fraction
-- is kept (flooring it and resetting the time would drain slower than configured). Written only
-- when a request is admitted; it expires when the queue is empty.

local function leaky_bucket_look(key, now, p, cost)
  local o, until_us = level_look(key, now, p, cost, '^l([^:]+):(%d+)$')
  if o then
    if o.allowed then
      o.delay = time_to_drain(o.level, p)
    end
    level_fill(o, p)
  end
  return o, until_us
end

local function leaky_bucket_record(key, now, p, cost, o)
  level_record(key, now, p, cost, o, 'l')
end

--@@give_back
-- leaky_bucket#give_back: gives back one cross-slot admission's units (see lua/give_back.lua).
local function leaky_bucket_give_back(key, kind, p, cost)
  level_give_back(key, p, cost, 'l')
end
