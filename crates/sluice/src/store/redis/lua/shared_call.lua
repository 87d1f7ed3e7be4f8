-- shared_call: several decisions of one limit in one call (shared_call.rs), after the one-limit
-- script's constants (one_script::one_text), whose now_at is then #KEYS + 1. The one-limit script
-- (now.lua, one_head.lua, one_<algorithm>.lua) is the body of `one`, reading the decision's key
-- and cost as KEYS[i] and ARGV[i] where it reads KEYS[1] and ARGV[1]; each of its returns answers
-- decision i. The decisions run in order, each seeing what the ones before it wrote, as calls of
-- their own would. One function made per call and one Lua call per decision cost Redis far less
-- than a script call per decision.
--
-- KEYS: each decision's state key. ARGV: each decision's cost (none on Redis TIME when all are 1),
--   then now in µs from the client's clock (none on Redis TIME).
-- Returns: each decision's reply, as one_head.lua says, in the order of KEYS.
local function one(i)
--[[one]]
end
local replies = {}
for i = 1, #KEYS do
  replies[i] = one(i)
end
return replies
