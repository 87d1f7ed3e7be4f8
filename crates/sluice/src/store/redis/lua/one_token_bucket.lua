-- one_token_bucket: one token-bucket limit (see one_head.lua for a block or penalty), at the floor
-- of what Redis must do (TIME, GET, SET). Restates token_bucket_look and token_bucket_record
-- (token_bucket.lua, algorithm/token_bucket.rs; the same float operations in the same order) after
-- one_head.lua, without the prelude: every function a script defines costs Redis time on every
-- call. Anything but a bucket in the key (a block marker, another algorithm's state) returns {} and
-- the caller decides with the general script instead.
--
-- KEYS[1]: the state key, "t<used level, %.17g>:<last µs>".
-- ARGV, the limit's constants (and the violations key): as one_head.lua says.
-- Returns: as one_head.lua says.

local raw = redis.pcall('GET', KEYS[1])
local level, last
if raw then
  if type(raw) == 'string' then
    level, last = string.match(raw, '^t([^:]+):(%d+)$')
  end
  if not level then
    if guarded then
      return from_marker(raw)
    end
    return {}
  end
end
local used = 0
if level then
  local elapsed = math.max(now - tonumber(last), 0)
  used = math.max(tonumber(level) - elapsed * limit / window, 0)
end
local allowed = used + cost <= capacity + 1e-6
if not allowed and guarded then
  return {}
end
local retry = -1
if allowed then
  used = used + cost
else
  retry = math.max(math.ceil((used + cost - capacity) * window / limit), 0)
end
local reset = math.max(math.ceil(used * window / limit), 0)
if allowed then
  local ms = math.ceil((expiry_from + math.max(reset, min_ttl)) / 1000)
  redis.call('SET', KEYS[1], 't' .. string.format('%.17g', used) .. ':' .. string.format('%d', now),
    px, string.format('%d', ms))
end
local remaining = math.max(math.floor(capacity - used + 1e-6), 0)
return { now, allowed and 1 or 0, remaining, reset, retry, violations, warning }
