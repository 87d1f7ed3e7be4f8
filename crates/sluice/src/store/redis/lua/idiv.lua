-- idiv: floor(a / b) for non-negative integers, exact even where a / b rounds to an integer
-- (Lua numbers are doubles, and a quotient one ulp off its integer floors the wrong way). The
-- first part of the prelude (prelude.lua) and of the one-limit scripts that divide, so that all
-- of them divide as Rust's integer division does.
local function idiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

