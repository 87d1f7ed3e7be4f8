-- sliding_window(key, now, p, cost, apply) -> outcome; restates algorithm/sliding_window.rs.
--
-- KEY: a HASH, field = bucket index floor(now / g) with g = max(floor(window / 10), 1),
-- value = units counted in that bucket. A bucket counts while now < (index + 11) * g. Redis 7.0
-- has no per-field expiry (HEXPIRE is 7.4+), so stale buckets are deleted here, whenever the key
-- is written; the key itself expires when its newest bucket stops counting.
-- With apply == false nothing is written.

local SW_BUCKETS = 10

local function sliding_window(key, now, p, cost, apply)
  local g = idiv(p.window, SW_BUCKETS)
  if g < 1 then
    g = 1
  end
  local current = idiv(now, g)
  local kind = redis.call('TYPE', key).ok
  local buckets = {}
  local stale = {}
  if kind == 'hash' then
    local flat = redis.call('HGETALL', key)
    for i = 1, #flat, 2 do
      local idx = tonumber(flat[i])
      if idx + SW_BUCKETS < current then
        stale[#stale + 1] = flat[i]
      else
        buckets[#buckets + 1] = { idx, tonumber(flat[i + 1]) }
      end
    end
    table.sort(buckets, function(a, b)
      return a[1] < b[1]
    end)
  end
  local count = 0
  for _, b in ipairs(buckets) do
    count = count + b[2]
  end
  local allowed = count + cost <= p.limit
  local retry = nil
  if not allowed then
    local need = count + cost - p.limit
    local freed = 0
    retry = p.window
    for _, b in ipairs(buckets) do
      freed = freed + b[2]
      if freed >= need then
        retry = (b[1] + SW_BUCKETS + 1) * g - now
        break
      end
    end
  end
  local recorded = apply and (allowed or p.count_denied)
  if recorded then
    if kind ~= 'hash' and kind ~= 'none' then
      redis.call('DEL', key)
    end
    if #stale > 0 then
      redis.call('HDEL', key, unpack(stale))
    end
    redis.call('HINCRBY', key, int(current), int(cost))
    local last = buckets[#buckets]
    if last and last[1] == current then
      last[2] = last[2] + cost
    else
      buckets[#buckets + 1] = { current, cost }
    end
    count = count + cost
  end
  local reset = 0
  local newest = buckets[#buckets]
  if newest then
    reset = (newest[1] + SW_BUCKETS + 1) * g - now
  end
  if recorded then
    keep(key, reset)
  end
  return outcome(allowed, math.max(p.limit - count, 0), reset, retry, 0)
end

