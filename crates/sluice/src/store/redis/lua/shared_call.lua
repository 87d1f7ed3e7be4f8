-- shared_call: several decisions of one spec in one call (shared_call.rs), after the one-limit
-- or rule script's constants (one_script::one_text, many_script::many_text), whose now_at is then
-- after every decision's costs, and `local keys_per, costs_per = <KEYS>, <costs of a decision>`.
-- The script (now.lua, then one_head.lua and <algorithm>.lua#one, or many_head.lua and the rule's
-- limits) is the body of `one`, reading decision i's KEYS and costs at its offsets (KEYS[k] is
-- written KEYS[keys_at + k], ARGV[n] ARGV[costs_at + n]); each of its returns answers decision
-- i. The decisions run in order, each seeing what the ones before it wrote, as calls of their own
-- would. One function made per call and one Lua call per decision cost Redis far less than a
-- script call per decision.
--
-- KEYS: each decision's KEYS, in turn. ARGV: each decision's costs (a one-limit script's, none on
-- Redis TIME when all are 1), then now in µs from the client's clock (none on Redis TIME).
-- Returns: each decision's reply, as its script says, in order.
local function one(i)
  local keys_at, costs_at = (i - 1) * keys_per, (i - 1) * costs_per
--[[one]]
end
local replies = {}
for i = 1, #KEYS / keys_per do
  replies[i] = one(i)
end
return replies
