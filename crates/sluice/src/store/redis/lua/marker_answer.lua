-- marker_answer: what `return from_marker(<value>)` in a one-limit script stands for (see
-- one_head.lua). one_script::one_text writes the lines below in its place, with <value> for `...`:
-- the answer of a block in force, or {} (a block that is over, or anything else).
do
  local held = ...
  if type(held) == 'string' and string.byte(held, 1) == 66 then
    local until_us = tonumber(string.sub(held, 2)) or 0
    if until_us > now then
      return { now, 0, 0, until_us - now, until_us - now, 0, until_us, violations, warning }
    end
  end
  return {}
end
